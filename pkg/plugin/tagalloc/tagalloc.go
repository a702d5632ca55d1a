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
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Pool returns every tag that may be allocated, in order: the helper's own
// DSCP pool, disjoint from Antrea's and from the code points real traffic
// uses (see package dscp for why).
func Pool() []uint8 { return dscp.Pool() }

// AntreaPool is the range Antrea's controller allocates its traces' tags
// from, disjoint from Pool.
func AntreaPool() []uint8 { return dscp.AntreaPool() }

// leasePrefix names the claim Leases; their labels (labels.ManagedBy,
// labels.Trace) let cleanup find them and tell whose trace holds one.
const leasePrefix = "kubectl-traceflow-tag-"

// LeaseName is the name of the Lease that claims tag.
// A tag's ECN variants share their DSCP value's Lease (kept.go).
func LeaseName(tag uint8) string { return leasePrefix + strconv.Itoa(int(dscp.Value(tag))) }

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
	// ServerNow is the API server's clock (ServerClock): a claim's expiry
	// is judged by times the server stamped, never by this machine's clock,
	// which may be minutes off the clock of whoever made the claim.
	ServerNow func(ctx context.Context) (time.Time, error)
	// Start picks where in the pool to begin, so that plugins started
	// together try different tags first.
	Start func(n int) int
	// Nonce makes each claim's holder identity unique, so that two claims
	// of one trace name (a retried trace) are never the same holder.
	Nonce func() string
	// Local, where set, is shared by the allocators of one run (a check
	// suite's, a matrix's traces): a tag one of them holds or is claiming
	// is skipped without asking the API server.
	Local *Local
}

// Claim is a held tag. Release gives it back.
type Claim struct {
	Tag uint8
	// Holder is the claim's own identity (trace name and a nonce).
	Holder string
	name   string
	uid    types.UID
	owner  Leases
	// local is the run's set the tag goes back to on Release (nil: none).
	local *Local
	// renewEvery is Hold's period (ClaimDuration/3 when zero).
	renewEvery time.Duration
	// renewed is when the claim was last written, made or renewed (this
	// machine's monotonic clock). Hold renews it renewEvery after that,
	// whichever Hold runs then: a run's kept claim goes from trace to
	// trace, each holding it for less than renewEvery.
	renewed atomic.Pointer[time.Time]
	// lost is set once Hold finds the Lease no longer this claim's.
	lost atomic.Bool
	// held, where set, is the run's claim of this tag's DSCP value, of
	// which this is one ECN variant (kept.go).
	held *heldClaim
}

// Acquire claims a free tag for trace, held for ttl (the trace's timeout plus
// the time to clean up). Tags in inUse (held by other engines, for example
// Antrea's own traces, or the trace's own probe) are skipped: a DSCP value
// the run does not hold is skipped where its tag with ECN 0 is in inUse. Where the run keeps its claims, a
// free ECN variant of a DSCP value it holds comes first. Where a claim of
// the run found every tag taken less than ExhaustedFor ago, and the run
// has no variant free, it fails so at once.
func (a *Allocator) Acquire(ctx context.Context, trace string, ttl time.Duration, inUse map[uint8]bool) (*Claim, error) {
	pool := Pool()
	start := 0
	if a.Start != nil {
		start = a.Start(len(pool)) % len(pool)
	}
	if c := a.Local.variant(inUse); c != nil {
		return c, nil
	}
	if a.Local.recentlyExhausted() {
		return nil, ErrExhausted
	}
	trace = a.Local.holder(trace)
	var now *time.Time // the server's clock, read once, only if a tag is taken
	for i := range pool {
		tag := pool[(start+i)%len(pool)]
		if inUse[tag] || !a.Local.take(tag) {
			continue
		}
		c, err := a.try(ctx, tag, trace, ttl, &now)
		if err != nil {
			a.Local.put(tag)
			return nil, err
		}
		if c != nil {
			c.local = a.Local
			if v := a.Local.adopt(c); v != nil {
				return v, nil
			}
			return c, nil
		}
		a.Local.put(tag)
	}
	a.Local.sawExhausted()
	return nil, ErrExhausted
}

func (a *Allocator) lease(tag uint8, trace string, ttl time.Duration) *coordinationv1.Lease {
	secs := int32(ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	holder := trace
	if a.Nonce != nil {
		holder += "/" + a.Nonce()
	}
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:   LeaseName(tag),
			Labels: map[string]string{labels.ManagedBy: labels.Manager, labels.Trace: trace},
		},
		// No acquire or renew time: this machine's clock says nothing the
		// server's creationTimestamp does not say better.
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs},
	}
}

// try claims tag, returning nil without error when another trace holds it.
func (a *Allocator) try(ctx context.Context, tag uint8, trace string, ttl time.Duration, now **time.Time) (*Claim, error) {
	want := a.lease(tag, trace, ttl)
	got, err := a.Leases.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		return a.claim(tag, want, got), nil
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
	if *now == nil {
		t, err := a.ServerNow(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the API server's clock to judge the claim of dataplane tag %d: %w", tag, err)
		}
		*now = &t
	}
	if !Expired(cur, **now) {
		return nil, nil
	}
	// Take over an expired claim as a new claim: delete exactly the Lease
	// we read (its UID and resourceVersion), then create ours, with its own
	// UID and holder. The former holder's late Release is conditional on
	// its UID and so cannot delete ours; if another plugin takes the tag
	// first, our delete or create fails and the next tag will do.
	uid, rv := cur.UID, cur.ResourceVersion
	err = a.Leases.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remove the expired claim of dataplane tag %d: %w", tag, err)
	}
	got, err = a.Leases.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim dataplane tag %d (Lease %s): %w", tag, want.Name, err)
	}
	return a.claim(tag, want, got), nil
}

// claim is the claim that creating want made (got, as the server stored it).
func (a *Allocator) claim(tag uint8, want, got *coordinationv1.Lease) *Claim {
	c := &Claim{Tag: tag, Holder: *want.Spec.HolderIdentity, name: got.Name, uid: got.UID, owner: a.Leases}
	c.wrote()
	return c
}

// wrote notes that the claim's Lease was written just now.
func (c *Claim) wrote() {
	now := time.Now()
	c.renewed.Store(&now)
}

// Stamped is when the API server last wrote l: the latest of its
// creationTimestamp and its managedFields' times, all stamped by the server.
func Stamped(l *coordinationv1.Lease) time.Time {
	t := l.CreationTimestamp.Time
	for _, mf := range l.ManagedFields {
		if mf.Time != nil && mf.Time.After(t) {
			t = mf.Time.Time
		}
	}
	return t
}

// Expired reports whether a claim Lease's holder has run out of time, by
// the server's clock: serverNow must come from the API server too.
func Expired(l *coordinationv1.Lease, serverNow time.Time) bool {
	if l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	end := Stamped(l).Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	return serverNow.After(end)
}

// ClaimDuration is how long a claim lasts without renewal. Short, so that
// the claim of a killed plugin expires within seconds and cleanup (or the
// next trace) can tell it from a running one; Hold renews it.
const ClaimDuration = 15 * time.Second

// Hold renews the claim every ClaimDuration/3 until ctx ends, so that it
// stays live while the trace runs. Each renewal is an update whose time the
// API server stamps (managedFields), which is what Expired reads. The
// period counts from the claim's last write, not from Hold's start: a run
// that keeps its claims hands one from trace to trace, each with a Hold of
// its own and shorter than the period, and a Hold that started its clock
// afresh never renewed it (a matrix's claims expired 15 s into the run,
// and a second plugin took them over while the first still traced with
// them). It stops when the Lease is no longer ours; a failed renewal is
// retried a period later (an API server restart takes less than a claim's
// duration).
func (c *Claim) Hold(ctx context.Context, local func() time.Time) {
	if c.held != nil {
		return // the run renews it (kept.go)
	}
	every := c.renewEvery
	if every == 0 {
		every = ClaimDuration / 3
	}
	var retry time.Duration
	for {
		wait := retry
		if wait == 0 {
			wait = every
			if last := c.renewed.Load(); last != nil {
				wait -= time.Since(*last)
			}
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		cur, err := c.owner.Get(ctx, c.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != c.uid) {
			c.lost.Store(true)
			return
		}
		retry = every
		if err != nil {
			continue
		}
		// The value is not read by anyone (the server's stamp is); it makes
		// the update a real write.
		rt := metav1.NewMicroTime(local())
		cur.Spec.RenewTime = &rt
		if _, err := c.owner.Update(ctx, cur, metav1.UpdateOptions{FieldManager: labels.Manager}); err == nil {
			c.wrote()
			retry = 0
		}
	}
}

// Release gives the tag back to the run: where the run keeps its claims
// (Local.Keep) the claim stays the run's for its next trace; otherwise
// its Lease is deleted, only if it is still ours (same UID). Should the
// delete fail, the Lease expires by itself, and the run's next try of the
// tag asks the API server.
func (c *Claim) Release(ctx context.Context) error {
	if c.held != nil {
		return c.local.giveBack(ctx, c)
	}
	defer c.local.freed(c.Tag)
	return c.remove(ctx)
}

// ServerClock reads the API server's clock through leases: a dry-run
// create (nothing is stored) comes back with the creationTimestamp the
// server would have stamped. It needs only the create right that claiming
// a tag needs anyway. A server that stamps nothing (a fake) gives local.
func ServerClock(leases Leases, local func() time.Time) func(ctx context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		got, err := leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "kubectl-traceflow-clock-"},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return time.Time{}, err
		}
		if got.CreationTimestamp.IsZero() {
			return local(), nil
		}
		return got.CreationTimestamp.Time, nil
	}
}
