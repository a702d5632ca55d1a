package ovnk

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// Apply makes the NB database hold exactly the rows of d among those this
// controller owns, in one transaction, and returns how many operations it
// took (0: nothing to do). The client must monitor the tables of NBModel.
// Owned: ovn_cluster_router, its rtos- ports and the routes and policies whose
// owner-controller is ControllerName, switches with
// other_config:subnet and everything on them, load balancers with
// k8s.ovn.org/kind=Service, port groups and address sets whose
// owner-controller is ControllerName.
func Apply(ctx context.Context, c client.Client, d Desired) (int, error) {
	a := &applier{c: c, lspUUID: map[string]string{}, lbUUID: map[string]string{}}
	if err := a.read(ctx); err != nil {
		return 0, err
	}
	steps := []func(Desired) error{a.applyLBs, a.applySets, a.applyRouter, a.applySwitches, a.applyPortGroups}
	for _, step := range steps {
		if err := step(d); err != nil {
			return 0, err
		}
	}
	if len(a.ops) == 0 {
		return 0, nil
	}
	res, err := c.Transact(ctx, a.ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(res, a.ops)
	}
	if err != nil {
		return 0, fmt.Errorf("NB transaction of %d operations: %w", len(a.ops), err)
	}
	// The next Apply reads the cache: wait until it holds what was inserted,
	// or a slow update would make it insert load balancers and ACLs twice.
	return len(a.ops), waitForInserts(ctx, c, a.ops, res)
}

type applier struct {
	c       client.Client
	ops     []ovsdb.Operation
	n       int
	lspUUID map[string]string
	lbUUID  map[string]string

	routers  []LogicalRouter
	lrps     []LogicalRouterPort
	routes   []LogicalRouterStaticRoute
	policies []LogicalRouterPolicy
	switches []LogicalSwitch
	lsps     []LogicalSwitchPort
	lbs      []LoadBalancer
	acls     []ACL
	pgs      []PortGroup
	sets     []AddressSet
}

func (a *applier) read(ctx context.Context) error {
	for _, l := range []any{&a.routers, &a.lrps, &a.routes, &a.policies, &a.switches, &a.lsps, &a.lbs, &a.acls, &a.pgs, &a.sets} {
		if err := a.c.List(ctx, l); err != nil {
			return fmt.Errorf("read the NB cache: %w", err)
		}
	}
	return nil
}

// named returns a fresh named-uuid for a row inserted in this transaction.
func (a *applier) named() string {
	a.n++
	return fmt.Sprintf("row%d", a.n)
}

func (a *applier) add(ops []ovsdb.Operation, err error) error {
	if err != nil {
		return fmt.Errorf("build NB operation: %w", err)
	}
	a.ops = append(a.ops, ops...)
	return nil
}

func (a *applier) create(m model.Model) error { return a.add(a.c.Create(m)) }

func (a *applier) update(m model.Model, fields ...any) error {
	return a.add(a.c.Where(m).Update(m, fields...))
}

func (a *applier) remove(m model.Model) error { return a.add(a.c.Where(m).Delete()) }

func (a *applier) applyLBs(d Desired) error {
	have := map[string]LoadBalancer{}
	for _, lb := range a.lbs {
		if lb.ExternalIDs[keyLBKind] == "Service" {
			if _, dup := have[lb.Name]; dup {
				if err := a.remove(&LoadBalancer{UUID: lb.UUID}); err != nil {
					return err
				}
				continue
			}
			have[lb.Name] = lb
		}
	}
	for _, want := range d.LoadBalancers {
		old, ok := have[want.Name]
		delete(have, want.Name)
		if !ok {
			want.UUID = a.named()
			a.lbUUID[want.Name] = want.UUID
			if err := a.create(&want); err != nil {
				return err
			}
			continue
		}
		a.lbUUID[want.Name] = old.UUID
		if !sameMap(old.Vips, want.Vips) || !sameMap(old.Options, want.Options) ||
			!sameMap(old.ExternalIDs, want.ExternalIDs) || deref(old.Protocol) != deref(want.Protocol) {
			want.UUID = old.UUID
			if err := a.update(&want, &want.Vips, &want.Options, &want.ExternalIDs, &want.Protocol); err != nil {
				return err
			}
		}
	}
	for _, lb := range have {
		if err := a.remove(&LoadBalancer{UUID: lb.UUID}); err != nil {
			return err
		}
	}
	return nil
}

func (a *applier) applySets(d Desired) error {
	have := map[string]AddressSet{}
	for _, as := range a.sets {
		if as.ExternalIDs[keyOwnerController] == ControllerName {
			have[as.Name] = as
		}
	}
	for _, want := range d.AddressSets {
		old, ok := have[want.Name]
		delete(have, want.Name)
		switch {
		case !ok:
			want.UUID = a.named()
			if err := a.create(&want); err != nil {
				return err
			}
		case !sameSet(old.Addresses, want.Addresses) || !sameMap(old.ExternalIDs, want.ExternalIDs):
			want.UUID = old.UUID
			if err := a.update(&want, &want.Addresses, &want.ExternalIDs); err != nil {
				return err
			}
		}
	}
	for _, as := range have {
		if err := a.remove(&AddressSet{UUID: as.UUID}); err != nil {
			return err
		}
	}
	return nil
}

// waitForInserts waits until the cache holds every row the transaction
// inserted.
func waitForInserts(ctx context.Context, c client.Client, ops []ovsdb.Operation, res []ovsdb.OperationResult) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		missing := 0
		for i, op := range ops {
			if op.Op != ovsdb.OperationInsert || i >= len(res) {
				continue
			}
			if t := c.Cache().Table(op.Table); t == nil || t.Row(res[i].UUID.GoUUID) == nil {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("NB cache still lacks %d inserted rows: %w", missing, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func sameMap(x, y map[string]string) bool { return len(x) == len(y) && maps.Equal(x, y) }

func sameSet(x, y []string) bool {
	x, y = slices.Clone(x), slices.Clone(y)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
