package tagalloc

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// A run that keeps its claims hands a released claim to its next trace
// without an API call, claims under its own name, renews what it keeps,
// and deletes it all on Close; a claim released after Close is deleted.
func TestKeptClaimsServeTheRunsNextTraces(t *testing.T) {
	s, run, a, ctx := keepingRun(t, "tfmatrix-x")
	first, err := a.Acquire(ctx, "cell-1", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	leases := s.cs.CoordinationV1().Leases("traceflow-system")
	l, err := leases.Get(ctx, first.name, metav1.GetOptions{})
	if err != nil || l.Labels[labels.Trace] != "tfmatrix-x" {
		t.Fatalf("the claim's Lease %+v (%v): want it under the run's name", l, err)
	}
	first.renewEvery = 5 * time.Millisecond
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s.cs.ClearActions()
	second, err := a.Acquire(ctx, "cell-2", time.Minute, nil)
	if err != nil || second != first {
		t.Fatalf("the next trace's claim %+v (%v), want the kept one", second, err)
	}
	if n := len(s.cs.Actions()); n != 0 {
		t.Errorf("%d API calls to reuse a kept claim: %v", n, s.cs.Actions())
	}
	// Kept while idle: renewed, as a running trace's claim is.
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle claim renewed", func() bool {
		l, err := leases.Get(ctx, first.name, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil
	})
	// A kept tag that the trace may not carry (another engine's) is not
	// handed out: the trace claims another.
	third, err := a.Acquire(ctx, "cell-3", time.Minute, map[uint8]bool{first.Tag: true})
	if err != nil || third.Tag == first.Tag {
		t.Fatalf("claim %+v (%v), want a tag other than %d", third, err, first.Tag)
	}
	if err := third.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := run.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := leases.List(ctx, metav1.ListOptions{}); len(left.Items) != 0 {
		t.Fatalf("%d claims left after Close", len(left.Items))
	}
	late, err := a.Acquire(ctx, "cell-4", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := leases.List(ctx, metav1.ListOptions{}); len(left.Items) != 0 {
		t.Fatalf("a claim released after Close was kept: %d left", len(left.Items))
	}
}

// A kept claim whose Lease is no longer the run's (deleted, then taken by
// another plugin) is never handed out again.
func TestKeptClaimLostIsNotReused(t *testing.T) {
	s, _, a, ctx := keepingRun(t, "run")
	c, err := a.Acquire(ctx, "cell", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.renewEvery = 5 * time.Millisecond
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.cs.CoordinationV1().Leases("traceflow-system").Delete(ctx, c.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	other, err := s.alloc().Acquire(ctx, "other", time.Minute, nil)
	if err != nil || other.Tag != c.Tag {
		t.Fatalf("the other plugin's claim %+v (%v), want tag %d", other, err, c.Tag)
	}
	waitFor(t, "the idle renewal to find the claim lost", c.lost.Load)
	got, err := a.Acquire(ctx, "next", time.Minute, nil)
	if err != nil || got == c || got.Tag == c.Tag {
		t.Fatalf("claim %+v (%v): the lost claim of tag %d was handed out", got, err, c.Tag)
	}
}

// waitFor polls cond until it holds, failing after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A kept claim that goes from trace to trace, each holding it for less
// than the renewal period, is renewed all the same: its period counts from
// its last write, not from each Hold's start (before, a matrix's claims
// were never renewed, expired 15 s into the run, and another plugin took
// them over while the run still traced with them).
func TestKeptClaimHandedOnIsRenewed(t *testing.T) {
	s, _, a, ctx := keepingRun(t, "run")
	const every = 40 * time.Millisecond
	start := time.Now()
	var first *Claim
	for time.Since(start) < 10*every {
		c, err := a.Acquire(ctx, "cell", time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = c
			c.renewEvery = every
		} else if c != first {
			t.Fatalf("claim %+v, want the kept one", c)
		}
		// A trace: its own Hold for a quarter of the period.
		hold, stop := context.WithTimeout(ctx, every/4)
		c.Hold(hold, time.Now)
		stop()
		if err := c.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	updates := 0
	for _, act := range s.cs.Actions() {
		if act.GetVerb() == "update" {
			updates++
		}
	}
	// 10 periods passed; under load fewer renewals happen, never none.
	if updates < 3 {
		t.Fatalf("%d renewals in %s with a renewal due every %s", updates, time.Since(start).Round(time.Millisecond), every)
	}
}

// Yield deletes the run's idle claims, so that another run may take the
// tags; claims released later are kept again.
func TestYieldGivesUpIdleClaims(t *testing.T) {
	s, run, a, ctx := keepingRun(t, "run")
	busy, err := a.Acquire(ctx, "busy", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	idle, err := a.Acquire(ctx, "idle", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := run.Yield(ctx); err != nil {
		t.Fatal(err)
	}
	leases := s.cs.CoordinationV1().Leases("traceflow-system")
	if _, err := leases.Get(ctx, idle.name, metav1.GetOptions{}); err == nil {
		t.Fatal("the idle claim's Lease is still there after Yield")
	}
	other, err := s.alloc().Acquire(ctx, "other", time.Minute, map[uint8]bool{busy.Tag: true})
	if err != nil || other.Tag != idle.Tag {
		t.Fatalf("another plugin's claim %+v (%v), want the yielded tag %d", other, err, idle.Tag)
	}
	if err := busy.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if again, err := a.Acquire(ctx, "next", time.Minute, nil); err != nil || again != busy {
		t.Fatalf("claim %+v (%v): a claim released after Yield must be kept", again, err)
	}
}

// keepingRun is a run that keeps its claims, named name, with its
// allocator on a fake API server; the run's context ends with the test.
func keepingRun(t *testing.T, name string) (*server, *Local, *Allocator, context.Context) {
	t.Helper()
	s := newServer(time.Now())
	run := NewLocal()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	run.Keep(ctx, name)
	a := s.alloc()
	a.Local = run
	return s, run, a, ctx
}
