// Package tagalloc hands out the DSCP value that marks one trace's probe
// packet, so that traces running at the same time never see each other's
// packets. A tag is claimed by creating a Lease named after it: creation is
// atomic in the API server, so two plugins started at the same instant
// cannot both win the same tag, and a Lease's duration lets a claim left by
// a killed plugin expire by itself.
package tagalloc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The pool: the 16 DSCP values that RFC 2474 sets aside for experimental or
// local use end in 0b11. Antrea draws its tags from this pool, from 7 to 59
// in steps of 4, and so do we, so that a packet we tag is never mistaken for
// ordinary traffic with a meaningful DSCP.
const (
	minTag  = 7
	maxTag  = 59
	tagStep = 4
)

// Pool returns every tag that may be allocated, in order.
func Pool() []uint8 {
	var p []uint8
	for t := minTag; t <= maxTag; t += tagStep {
		p = append(p, uint8(t))
	}
	return p
}

// Labels on the claim Leases, so cleanup can find them.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "kubectl-traceflow"
	leasePrefix    = "kubectl-traceflow-tag-"
)

// LeaseName is the name of the Lease that claims tag.
func LeaseName(tag uint8) string { return leasePrefix + strconv.Itoa(int(tag)) }

// ErrExhausted means every tag is held by a running trace.
var ErrExhausted = errors.New("all dataplane tags are in use by running traces")

// Leases is the part of client-go's LeaseInterface the allocator uses.
type Leases interface {
	Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Allocator claims tags in one namespace.
type Allocator struct {
	Leases Leases
	// Now is the clock; Start picks where in the pool to begin, so that
	// plugins started together try different tags first.
	Now   func() time.Time
	Start func(n int) int
}

// Claim is a held tag. Release gives it back.
type Claim struct {
	Tag   uint8
	name  string
	uid   types.UID
	owner Leases
}

// Acquire claims a free tag for trace, held for ttl (the trace's timeout plus
// the time to clean up). Tags in inUse (held by other engines, for example
// Antrea's own traces) are skipped.
func (a *Allocator) Acquire(ctx context.Context, trace string, ttl time.Duration, inUse map[uint8]bool) (*Claim, error) {
	pool := Pool()
	start := 0
	if a.Start != nil {
		start = a.Start(len(pool)) % len(pool)
	}
	for i := range pool {
		tag := pool[(start+i)%len(pool)]
		if inUse[tag] {
			continue
		}
		c, err := a.try(ctx, tag, trace, ttl)
		if err != nil {
			return nil, err
		}
		if c != nil {
			return c, nil
		}
	}
	return nil, ErrExhausted
}

// try claims tag, returning nil without error when another trace holds it.
func (a *Allocator) try(ctx context.Context, tag uint8, trace string, ttl time.Duration) (*Claim, error) {
	now := metav1.NewMicroTime(a.Now())
	secs := int32(ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	want := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:   LeaseName(tag),
			Labels: map[string]string{ManagedByLabel: ManagedByValue},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &trace,
			LeaseDurationSeconds: &secs,
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}
	got, err := a.Leases.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		return &Claim{Tag: tag, name: got.Name, uid: got.UID, owner: a.Leases}, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("claim dataplane tag %d (Lease %s): %w", tag, want.Name, err)
	}
	cur, err := a.Leases.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // released meanwhile; the next tag will do
	}
	if err != nil {
		return nil, fmt.Errorf("read claim of dataplane tag %d: %w", tag, err)
	}
	if !Expired(cur, a.Now()) {
		return nil, nil
	}
	// Take over an expired claim. The update carries the resourceVersion we
	// read, so if another plugin takes it first ours fails with a conflict.
	cur = cur.DeepCopy()
	cur.Spec = want.Spec
	got, err = a.Leases.Update(ctx, cur, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take over expired claim of dataplane tag %d: %w", tag, err)
	}
	return &Claim{Tag: tag, name: got.Name, uid: got.UID, owner: a.Leases}, nil
}

// Expired reports whether a claim Lease's holder has run out of time.
func Expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	end := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	return now.After(end)
}

// Release deletes the claim, only if it is still ours (same UID).
func (c *Claim) Release(ctx context.Context) error {
	uid := c.uid
	err := c.owner.Delete(ctx, c.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("release dataplane tag %d: %w", c.Tag, err)
	}
	return nil
}
