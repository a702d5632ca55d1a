package tagalloc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// server is a fake API server for Leases that stamps creationTimestamp
// and a fresh UID from its own clock, and honours delete preconditions, as
// the real one does.
type server struct {
	cs  *fake.Clientset
	mu  sync.Mutex
	now time.Time
	n   int
}

func newServer(now time.Time) *server {
	s := &server{cs: fake.NewClientset(), now: now}
	s.cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.n++
		l.CreationTimestamp = metav1.NewTime(s.now)
		l.UID = types.UID(fmt.Sprintf("uid-%d", s.n))
		return false, nil, nil
	})
	s.cs.PrependReactor("delete", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		pre := d.GetDeleteOptions().Preconditions
		if pre == nil || pre.UID == nil {
			return false, nil, nil
		}
		cur, err := s.cs.Tracker().Get(a.GetResource(), a.GetNamespace(), d.GetName())
		if err != nil {
			return false, nil, nil
		}
		if cur.(*coordinationv1.Lease).UID != *pre.UID {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, d.GetName(), errors.New("UID precondition failed"))
		}
		return false, nil, nil
	})
	// An update of an object that was deleted and made again meanwhile
	// fails, as its stale resourceVersion makes it fail on a real server
	// (the fake tracker checks no resourceVersion).
	s.cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		cur, err := s.cs.Tracker().Get(a.GetResource(), a.GetNamespace(), l.Name)
		if err == nil && cur.(*coordinationv1.Lease).UID != l.UID {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, l.Name, errors.New("stale"))
		}
		return false, nil, nil
	})
	return s
}

func (s *server) set(now time.Time) {
	s.mu.Lock()
	s.now = now
	s.mu.Unlock()
}

func (s *server) clock(context.Context) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now, nil
}

func (s *server) alloc() *Allocator {
	return &Allocator{Leases: s.cs.CoordinationV1().Leases("traceflow-system"), ServerNow: s.clock,
		Nonce: func() string { return "n" }}
}

func newAlloc(cs *fake.Clientset, now time.Time) *Allocator {
	return &Allocator{Leases: cs.CoordinationV1().Leases("kube-system"),
		ServerNow: func(context.Context) (time.Time, error) { return now, nil }}
}

// The allocator's pool is the helper's DSCP pool, disjoint from Antrea's.
func TestPoolIsTheHelpersDSCPPool(t *testing.T) {
	if !slices.Equal(Pool(), dscp.Pool()) || len(Pool()) != 14 {
		t.Fatalf("pool %v, want dscp.Pool() %v", Pool(), dscp.Pool())
	}
	for _, tag := range AntreaPool() {
		if slices.Contains(Pool(), tag) {
			t.Errorf("tag %d is in both pools", tag)
		}
	}
}

// Tags in use by others (Antrea's, through inUse) are skipped, and the
// pool's own values are all that is ever handed out.
func TestAcquireOnlyFromThePool(t *testing.T) {
	a := newAlloc(fake.NewClientset(), t0)
	in := map[uint8]bool{}
	for _, tag := range Pool() {
		in[tag] = true
	}
	for range Pool() {
		c, err := a.Acquire(context.Background(), "tf", 30*time.Second, map[uint8]bool{3: true})
		if errors.Is(err, ErrExhausted) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !in[c.Tag] || c.Tag == 3 {
			t.Errorf("tag %d handed out (not in the pool, or in use)", c.Tag)
		}
	}
}

func TestAcquireDistinctUntilExhausted(t *testing.T) {
	a := newAlloc(fake.NewClientset(), t0)
	seen := map[uint8]bool{}
	for range Pool() {
		c, err := a.Acquire(context.Background(), "tf", 30*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.Tag] {
			t.Fatalf("tag %d handed out twice", c.Tag)
		}
		seen[c.Tag] = true
	}
	if _, err := a.Acquire(context.Background(), "tf", 30*time.Second, nil); !errors.Is(err, ErrExhausted) {
		t.Fatalf("want ErrExhausted, got %v", err)
	}
}

func TestAcquireSkipsTagsInUseElsewhere(t *testing.T) {
	a := newAlloc(fake.NewClientset(), t0)
	c, err := a.Acquire(context.Background(), "tf", time.Minute, map[uint8]bool{3: true, 5: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Tag != 9 {
		t.Fatalf("got tag %d, want 9 (3 and 5 are in use elsewhere)", c.Tag)
	}
}

func TestExpiredClaimIsTakenOverLiveOneIsNot(t *testing.T) {
	now := time.Now() // the fake stamps managedFields with the real clock
	srv := newServer(now)
	old, err := srv.alloc().Acquire(context.Background(), "killed-plugin", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 5 s later by the server's clock the claim still holds.
	srv.set(now.Add(5 * time.Second))
	c, err := srv.alloc().Acquire(context.Background(), "tf2", 10*time.Second, nil)
	if err != nil || c.Tag == 3 {
		t.Fatalf("live claim taken over: tag %v err %v", c, err)
	}
	// 11 s later it has expired: tag 3 is free again, as a new claim.
	srv.set(now.Add(11 * time.Second))
	c, err = srv.alloc().Acquire(context.Background(), "tf3", 10*time.Second, nil)
	if err != nil || c.Tag != 3 {
		t.Fatalf("expired claim not taken over: %v %v", c, err)
	}
	l, err := srv.cs.CoordinationV1().Leases("traceflow-system").Get(context.Background(), LeaseName(3), metav1.GetOptions{})
	if err != nil || *l.Spec.HolderIdentity != "tf3/n" || l.Labels[labels.Trace] != "tf3" || l.UID == old.uid {
		t.Fatalf("lease after takeover: %+v %v", l, err)
	}
	// The former holder comes back late and releases: the new claim stays.
	if err := old.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.cs.CoordinationV1().Leases("traceflow-system").Get(context.Background(), LeaseName(3), metav1.GetOptions{}); err != nil {
		t.Fatalf("the former holder's late release deleted the new claim: %v", err)
	}
}

// Expiry is judged by the server's stamps, whatever this machine's clock
// says: a laptop an hour ahead does not take over a live claim.
func TestExpiryUsesServerTimeNotLocal(t *testing.T) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(int32(30))}}
	if Expired(l, t0.Add(29*time.Second)) || !Expired(l, t0.Add(31*time.Second)) {
		t.Error("expiry is not creationTimestamp + duration")
	}
	later := metav1.NewTime(t0.Add(20 * time.Second))
	l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x", Time: &later}}
	if Expired(l, t0.Add(31*time.Second)) {
		t.Error("a later server-stamped write (managedFields time) does not extend the claim")
	}
	now := time.Now() // the fake stamps managedFields with the real clock
	srv := newServer(now)
	if _, err := srv.alloc().Acquire(context.Background(), "a", 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	a := srv.alloc()
	a.Start = func(int) int { return 0 }
	c, err := a.Acquire(context.Background(), "b", 30*time.Second, nil)
	if err != nil || c.Tag == 3 {
		t.Fatalf("took over a live claim: %v %v", c, err)
	}
}

func TestTakeoverLostRaceMovesOn(t *testing.T) {
	now := time.Now() // the fake stamps managedFields with the real clock
	srv := newServer(now)
	if _, err := srv.alloc().Acquire(context.Background(), "old", time.Second, nil); err != nil {
		t.Fatal(err)
	}
	srv.cs.PrependReactor("delete", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, LeaseName(3), errors.New("raced"))
	})
	srv.set(now.Add(time.Minute))
	c, err := srv.alloc().Acquire(context.Background(), "new", time.Minute, nil)
	if err != nil || c.Tag != 5 {
		t.Fatalf("after losing the race for 3 want 5, got %v %v", c, err)
	}
}

func TestReleaseFreesTheTag(t *testing.T) {
	cs := fake.NewClientset()
	a := newAlloc(cs, t0)
	c, err := a.Acquire(context.Background(), "tf", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	c2, err := a.Acquire(context.Background(), "tf2", time.Minute, nil)
	if err != nil || c2.Tag != c.Tag {
		t.Fatalf("released tag %d not reused: %v %v", c.Tag, c2, err)
	}
	// Releasing twice is harmless.
	if err := c.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentAcquireGivesDistinctTags(t *testing.T) {
	a := newAlloc(fake.NewClientset(), t0)
	var mu sync.Mutex
	got := map[uint8]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c, err := a.Acquire(context.Background(), "tf", time.Minute, nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got[c.Tag]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != 8 {
		t.Fatalf("8 concurrent traces got tags %v", got)
	}
}

func TestAPIErrorIsReturned(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New("no"))
	})
	_, err := newAlloc(cs, t0).Acquire(context.Background(), "tf", time.Minute, nil)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("want the Forbidden error wrapped, got %v", err)
	}
}

// Hold renews a running trace's claim by writing it, which the server
// stamps; it stops once the Lease is someone else's.
func TestHoldRenewsUntilTheClaimIsNotOurs(t *testing.T) {
	srv := newServer(time.Now())
	c, err := srv.alloc().Acquire(context.Background(), "running", ClaimDuration, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.renewEvery = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { c.Hold(ctx, time.Now); close(done) }()
	leases := srv.cs.CoordinationV1().Leases("traceflow-system")
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := leases.Get(context.Background(), c.name, metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim was never renewed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Someone took the tag over (a new claim, a new UID): Hold stops.
	if err := leases.Delete(context.Background(), c.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.alloc().Acquire(context.Background(), "next", ClaimDuration, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Hold went on renewing a claim that is not ours")
	}
}

// verbs counts the creates and gets on leases the fake has seen (the
// fake's clock is read without a request).
func verbs(cs *fake.Clientset) (create, get int) {
	for _, a := range cs.Actions() {
		switch a.GetVerb() {
		case "create":
			create++
		case "get":
			get++
		}
	}
	return create, get
}

// Allocators sharing a Local skip the tags the run holds without asking
// the API server; a tag another plugin holds is still asked about (the
// API server alone knows it), and a tag the run gives back is taken again.
func TestLocalSkipsTheRunsOwnTags(t *testing.T) {
	s := newServer(t0)
	run := NewLocal()
	first, second := s.alloc(), s.alloc()
	first.Local, second.Local = run, run
	// Another plugin holds the third tag of the pool, live.
	other := s.alloc()
	if _, err := other.Acquire(context.Background(), "other", time.Minute, map[uint8]bool{3: true, 5: true}); err != nil {
		t.Fatal(err)
	}
	a, err := first.Acquire(context.Background(), "a", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := second.Acquire(context.Background(), "b", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Tag != 3 || b.Tag != 5 {
		t.Fatalf("tags %d and %d, want 3 and 5", a.Tag, b.Tag)
	}
	// 3 creates: the other plugin's, a's, b's. The run's own tag 3 was
	// never asked about again.
	if c, g := verbs(s.cs); c != 3 || g != 0 {
		t.Errorf("%d creates and %d gets, want 3 and 0: %v", c, g, s.cs.Actions())
	}
	s.cs.ClearActions()
	c, err := first.Acquire(context.Background(), "c", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 9 is the other plugin's: asked (create refused, read, clock), then 13.
	if c.Tag != 13 {
		t.Fatalf("tag %d, want 13 (3 and 5 the run's, 9 another plugin's)", c.Tag)
	}
	if cr, g := verbs(s.cs); cr != 2 || g != 1 {
		t.Errorf("%d creates and %d gets, want 2 and 1 (tag 9 asked about, 13 claimed): %v", cr, g, s.cs.Actions())
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	d, err := second.Acquire(context.Background(), "d", time.Minute, nil)
	if err != nil || d.Tag != 3 {
		t.Fatalf("after a's release: tag %v (%v), want 3 again", d, err)
	}
}

// A try that fails (the tag is another plugin's, or the API server says
// no) leaves the tag free for the run's next try.
func TestLocalForgetsFailedTries(t *testing.T) {
	s := newServer(t0)
	run := NewLocal()
	other := s.alloc()
	held, err := other.Acquire(context.Background(), "other", time.Minute, nil)
	if err != nil || held.Tag != 3 {
		t.Fatalf("the other plugin's claim: %v %v", held, err)
	}
	mine := s.alloc()
	mine.Local = run
	got, err := mine.Acquire(context.Background(), "a", time.Minute, nil)
	if err != nil || got.Tag != 5 {
		t.Fatalf("claim %v %v, want 5", got, err)
	}
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	again, err := mine.Acquire(context.Background(), "b", time.Minute, nil)
	if err != nil || again.Tag != 3 {
		t.Fatalf("claim %v %v, want 3, given up by the other plugin", again, err)
	}
}

// Many traces of one run claiming at once get distinct tags, each with one
// create: none of them asks about a tag another trace of the run holds.
func TestLocalConcurrentClaimsOneCreateEach(t *testing.T) {
	s := newServer(t0)
	run := NewLocal()
	var mu sync.Mutex
	got := map[uint8]bool{}
	var wg sync.WaitGroup
	for range len(Pool()) {
		wg.Go(func() {
			a := s.alloc()
			a.Local = run
			c, err := a.Acquire(context.Background(), "tf", time.Minute, nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got[c.Tag] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != len(Pool()) {
		t.Fatalf("%d traces got %d distinct tags", len(Pool()), len(got))
	}
	if c, g := verbs(s.cs); c != len(Pool()) || g != 0 {
		t.Errorf("%d creates and %d gets for %d claims, want one create each", c, g, len(Pool()))
	}
}

// A run that found every tag taken by other plugins believes it for
// ExhaustedFor without asking again; after that, or once the run itself
// deletes a claim, it asks. Its idle kept claims serve it all along.
func TestRunRemembersThePoolTakenForAWhile(t *testing.T) {
	s := newServer(t0)
	other := s.alloc()
	var held []*Claim
	for range Pool()[1:] {
		c, err := other.Acquire(context.Background(), "other", time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	now := t0
	run := NewLocal()
	run.clock = func() time.Time { return now }
	mine := s.alloc()
	mine.Local = run
	own, err := mine.Acquire(context.Background(), "a", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.cs.ClearActions()
	if _, err := mine.Acquire(context.Background(), "b", time.Minute, nil); !errors.Is(err, ErrExhausted) {
		t.Fatalf("with the pool taken: %v, want exhausted", err)
	}
	if c, g := verbs(s.cs); c == 0 || g == 0 {
		t.Fatalf("the first finding asked nothing (%d creates, %d gets)", c, g)
	}
	s.cs.ClearActions()
	now = now.Add(ExhaustedFor / 2)
	if _, err := mine.Acquire(context.Background(), "c", time.Minute, nil); !errors.Is(err, ErrExhausted) {
		t.Fatalf("again at once: %v, want exhausted", err)
	}
	if n := len(s.cs.Actions()); n != 0 {
		t.Fatalf("asked again within ExhaustedFor: %v", s.cs.Actions())
	}
	// Another plugin lets a tag go: the run learns it once ExhaustedFor
	// has passed.
	if err := held[0].Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := mine.Acquire(context.Background(), "d", time.Minute, nil); !errors.Is(err, ErrExhausted) {
		t.Fatalf("within ExhaustedFor: %v, want exhausted without asking", err)
	}
	now = now.Add(ExhaustedFor)
	d, err := mine.Acquire(context.Background(), "d", time.Minute, nil)
	if err != nil || d.Tag != held[0].Tag {
		t.Fatalf("after ExhaustedFor: %v %v, want tag %d", d, err, held[0].Tag)
	}
	// Taken again; the run deleting its own claim asks at once after.
	if _, err := mine.Acquire(context.Background(), "e", time.Minute, nil); !errors.Is(err, ErrExhausted) {
		t.Fatal(err)
	}
	if err := own.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e, err := mine.Acquire(context.Background(), "e", time.Minute, nil); err != nil || e.Tag != own.Tag {
		t.Fatalf("after the run's own release: %v %v, want tag %d", e, err, own.Tag)
	}
}
