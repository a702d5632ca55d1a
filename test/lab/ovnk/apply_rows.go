package ovnk

import "strings"

func (a *applier) applyRouter(d Desired) error {
	lrpByName := map[string]LogicalRouterPort{}
	for _, p := range a.lrps {
		lrpByName[p.Name] = p
	}
	var r *LogicalRouter
	for i := range a.routers {
		if a.routers[i].Name == ClusterRouter {
			r = &a.routers[i]
		}
	}
	var ports []string
	if r != nil {
		for _, u := range r.Ports {
			if p, ok := a.lrpByUUID(u); ok && !strings.HasPrefix(p.Name, "rtos-") {
				ports = append(ports, u) // not ours: keep
			}
		}
	}
	for _, want := range d.RouterPorts {
		old, ok := lrpByName[want.Name]
		switch {
		case !ok:
			want.UUID = a.named()
			if err := a.create(&want); err != nil {
				return err
			}
		case old.MAC != want.MAC || !sameSet(old.Networks, want.Networks):
			want.UUID = old.UUID
			if err := a.update(&want, &want.MAC, &want.Networks); err != nil {
				return err
			}
		default:
			want.UUID = old.UUID
		}
		ports = append(ports, want.UUID)
	}
	var keptRoutes, keptPolicies []string
	if r != nil {
		keptRoutes, keptPolicies = r.StaticRoutes, r.Policies
	}
	routes, err := a.routeSet(d.Routes, keptRoutes)
	if err != nil {
		return err
	}
	policies, err := a.policySet(d.Policies, keptPolicies)
	if err != nil {
		return err
	}
	if r == nil {
		return a.create(&LogicalRouter{UUID: a.named(), Name: ClusterRouter, Ports: ports, StaticRoutes: routes, Policies: policies})
	}
	if !sameSet(r.Ports, ports) || !sameSet(r.StaticRoutes, routes) || !sameSet(r.Policies, policies) {
		nr := LogicalRouter{UUID: r.UUID, Ports: ports, StaticRoutes: routes, Policies: policies}
		return a.update(&nr, &nr.Ports, &nr.StaticRoutes, &nr.Policies)
	}
	return nil
}

// policySet is the router's policies once want are in it (ownedRows).
func (a *applier) policySet(want []LogicalRouterPolicy, current []string) ([]string, error) {
	return ownedRows(a, a.policies, want, current,
		func(p *LogicalRouterPolicy) (*string, map[string]string) { return &p.UUID, p.ExternalIDs },
		func(old, w *LogicalRouterPolicy) []any {
			if old.Priority == w.Priority && old.Match == w.Match && old.Action == w.Action && sameSet(old.Nexthops, w.Nexthops) {
				return nil
			}
			return []any{&w.Priority, &w.Match, &w.Action, &w.Nexthops}
		})
}

// routeSet is the router's static routes once want are in it (ownedRows).
func (a *applier) routeSet(want []LogicalRouterStaticRoute, current []string) ([]string, error) {
	return ownedRows(a, a.routes, want, current,
		func(r *LogicalRouterStaticRoute) (*string, map[string]string) { return &r.UUID, r.ExternalIDs },
		func(old, w *LogicalRouterStaticRoute) []any {
			if old.IPPrefix == w.IPPrefix && old.Nexthop == w.Nexthop {
				return nil
			}
			return []any{&w.IPPrefix, &w.Nexthop}
		})
}

// ownedRows is a router column's references (static routes, policies)
// once want are in it: the rows of current that are not this
// controller's, its own that are still wanted (updated in the fields
// changed names), and new rows for the rest. A row no longer referenced
// is removed by the database itself (neither table is a root table). row
// gives a row's UUID field and external_ids; have are the table's rows.
func ownedRows[T any](a *applier, have, want []T, current []string, row func(*T) (*string, map[string]string), changed func(old, w *T) []any) ([]string, error) {
	byID := map[string]*T{}
	var out []string
	for _, u := range current {
		for i := range have {
			uuid, ids := row(&have[i])
			switch {
			case *uuid != u:
			case ids[keyOwnerController] != ControllerName:
				out = append(out, u) // not ours: keep
			default:
				byID[ids[keyID]] = &have[i]
			}
		}
	}
	for _, w := range want {
		uuid, ids := row(&w)
		old, ok := byID[ids[keyID]]
		var err error
		if !ok {
			*uuid = a.named()
			err = a.create(&w)
		} else {
			oldUUID, _ := row(old)
			*uuid = *oldUUID
			if fields := changed(old, &w); fields != nil {
				err = a.update(&w, fields...)
			}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *uuid)
	}
	return out, nil
}

func (a *applier) lrpByUUID(u string) (LogicalRouterPort, bool) {
	for _, p := range a.lrps {
		if p.UUID == u {
			return p, true
		}
	}
	return LogicalRouterPort{}, false
}

func (a *applier) applySwitches(d Desired) error {
	lspByName := map[string]LogicalSwitchPort{}
	for _, p := range a.lsps {
		lspByName[p.Name] = p
	}
	have := map[string]LogicalSwitch{}
	for _, s := range a.switches {
		if s.OtherConfig["subnet"] != "" {
			have[s.Name] = s
		}
	}
	for _, want := range d.Switches {
		old, exists := have[want.Switch.Name]
		delete(have, want.Switch.Name)
		var ports []string
		for _, p := range want.Ports {
			u, err := a.lsp(p, lspByName)
			if err != nil {
				return err
			}
			ports = append(ports, u)
		}
		acls, err := a.aclSet(want.ACLs, old.ACLs)
		if err != nil {
			return err
		}
		var lbs []string
		for _, n := range want.LBNames {
			lbs = append(lbs, a.lbUUID[n])
		}
		sw := want.Switch
		sw.Ports, sw.ACLs, sw.LoadBalancer = ports, acls, lbs
		if !exists {
			sw.UUID = a.named()
			if err := a.create(&sw); err != nil {
				return err
			}
			continue
		}
		sw.UUID = old.UUID
		if !sameSet(old.Ports, ports) || !sameSet(old.ACLs, acls) || !sameSet(old.LoadBalancer, lbs) ||
			!sameMap(old.OtherConfig, sw.OtherConfig) {
			if err := a.update(&sw, &sw.Ports, &sw.ACLs, &sw.LoadBalancer, &sw.OtherConfig); err != nil {
				return err
			}
		}
	}
	for _, s := range have {
		if err := a.remove(&LogicalSwitch{UUID: s.UUID}); err != nil {
			return err
		}
	}
	return nil
}

// lsp creates or updates a switch port and returns its (possibly named) UUID.
func (a *applier) lsp(want LogicalSwitchPort, byName map[string]LogicalSwitchPort) (string, error) {
	old, ok := byName[want.Name]
	switch {
	case !ok:
		want.UUID = a.named()
		if err := a.create(&want); err != nil {
			return "", err
		}
	case old.Type != want.Type || !sameSet(old.Addresses, want.Addresses) || !sameSet(old.PortSecurity, want.PortSecurity) ||
		!sameMap(old.Options, want.Options) || !sameMap(old.ExternalIDs, want.ExternalIDs):
		want.UUID = old.UUID
		if err := a.update(&want, &want.Type, &want.Addresses, &want.PortSecurity, &want.Options, &want.ExternalIDs); err != nil {
			return "", err
		}
	default:
		want.UUID = old.UUID
	}
	a.lspUUID[want.Name] = want.UUID
	return want.UUID, nil
}

// aclSet creates or updates the ACLs wanted on a switch or port group whose
// acls column holds current, matching them by k8s.ovn.org/id, and returns the
// new column; ACLs left out are garbage-collected by the database.
func (a *applier) aclSet(want []ACL, current []string) ([]string, error) {
	byID := map[string]ACL{}
	for _, u := range current {
		for _, acl := range a.acls {
			if acl.UUID == u {
				byID[acl.ExternalIDs[keyID]] = acl
			}
		}
	}
	var out []string
	for _, w := range want {
		old, ok := byID[w.ExternalIDs[keyID]]
		delete(byID, w.ExternalIDs[keyID])
		switch {
		case !ok:
			w.UUID = a.named()
			if err := a.create(&w); err != nil {
				return nil, err
			}
		case old.Priority != w.Priority || old.Direction != w.Direction || old.Match != w.Match || old.Action != w.Action ||
			deref(old.Name) != deref(w.Name) || !sameMap(old.Options, w.Options) || !sameMap(old.ExternalIDs, w.ExternalIDs):
			w.UUID = old.UUID
			if err := a.update(&w, &w.Priority, &w.Direction, &w.Match, &w.Action, &w.Name, &w.Options, &w.ExternalIDs); err != nil {
				return nil, err
			}
		default:
			w.UUID = old.UUID
		}
		out = append(out, w.UUID)
	}
	return out, nil
}

func (a *applier) applyPortGroups(d Desired) error {
	have := map[string]PortGroup{}
	for _, pg := range a.pgs {
		if pg.ExternalIDs[keyOwnerController] == ControllerName {
			have[pg.Name] = pg
		}
	}
	for _, want := range d.PortGroups {
		old, exists := have[want.Group.Name]
		delete(have, want.Group.Name)
		acls, err := a.aclSet(want.ACLs, old.ACLs)
		if err != nil {
			return err
		}
		var ports []string
		for _, n := range want.PortNames {
			if u, ok := a.lspUUID[n]; ok {
				ports = append(ports, u)
			}
		}
		pg := want.Group
		pg.Ports, pg.ACLs = ports, acls
		if !exists {
			pg.UUID = a.named()
			if err := a.create(&pg); err != nil {
				return err
			}
			continue
		}
		pg.UUID = old.UUID
		if !sameSet(old.Ports, ports) || !sameSet(old.ACLs, acls) || !sameMap(old.ExternalIDs, pg.ExternalIDs) {
			if err := a.update(&pg, &pg.Ports, &pg.ACLs, &pg.ExternalIDs); err != nil {
				return err
			}
		}
	}
	for _, pg := range have {
		if err := a.remove(&PortGroup{UUID: pg.UUID}); err != nil {
			return err
		}
	}
	return nil
}
