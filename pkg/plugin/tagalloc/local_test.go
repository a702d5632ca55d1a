package tagalloc

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// A run that keeps its claims hands a released claim to its next trace
// without an API call, claims under its own name, renews what it keeps,
// and deletes it all on Close; a claim released after Close is deleted.
func TestKeptClaimsServeTheRunsNextTraces(t *testing.T) {
	s, run, a, ctx := keepingRun(t, "tfmatrix-x")
	run.renewEvery = 5 * time.Millisecond
	first, err := a.Acquire(ctx, "cell-1", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	leases := s.cs.CoordinationV1().Leases("traceflow-system")
	l, err := leases.Get(ctx, first.name, metav1.GetOptions{})
	if err != nil || l.Labels[labels.Trace] != "tfmatrix-x" {
		t.Fatalf("the claim's Lease %+v (%v): want it under the run's name", l, err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s.cs.ClearActions()
	second, err := a.Acquire(ctx, "cell-2", time.Minute, nil)
	if err != nil || second.Tag != first.Tag || second.name != first.name {
		t.Fatalf("the next trace's claim %+v (%v), want the kept tag %d", second, err, first.Tag)
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
	// A kept DSCP value none of whose tags the trace may carry is not
	// handed out: the trace claims another.
	d := dscp.Value(first.Tag)
	third, err := a.Acquire(ctx, "cell-3", time.Minute, map[uint8]bool{d: true, dscp.Tag(d, 1): true, dscp.Tag(d, 2): true})
	if err != nil || dscp.Value(third.Tag) == dscp.Value(first.Tag) {
		t.Fatalf("claim %+v (%v), want a DSCP value other than %d", third, err, first.Tag)
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

// The traces of a run that keeps its claims share each DSCP value it
// holds, three at once, told apart by their ECN codepoints, under the one
// Lease; a fourth claims a DSCP value of its own. A tag the trace already
// carries (a round trip's probe, claiming its answer's) is not handed out
// again, and a variant whose trace ended comes back. A claim still
// carried at Close goes with its last trace.
func TestKeptClaimServesThreeTracesAtOnce(t *testing.T) {
	s, run, a, ctx := keepingRun(t, "run")
	leases := s.cs.CoordinationV1().Leases("traceflow-system")
	var got []*Claim
	for i := range 3 {
		var also map[uint8]bool
		if i > 0 {
			also = map[uint8]bool{got[i-1].Tag: true}
		}
		c, err := a.Acquire(ctx, "cell", time.Minute, also)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c)
	}
	d := dscp.Value(got[0].Tag)
	for e, c := range got {
		if c.Tag != dscp.Tag(d, uint8(e)) || c.name != LeaseName(d) { //nolint:gosec // three
			t.Errorf("claim %d: tag %s, Lease %s; want %s under %s", e, dscp.Name(c.Tag), c.name, dscp.Name(dscp.Tag(d, uint8(e))), LeaseName(d)) //nolint:gosec // three
		}
	}
	if left, _ := leases.List(ctx, metav1.ListOptions{}); len(left.Items) != 1 {
		t.Fatalf("%d Leases for three traces of one DSCP value, want 1", len(left.Items))
	}
	fourth, err := a.Acquire(ctx, "cell", time.Minute, nil)
	if err != nil || dscp.Value(fourth.Tag) == d || dscp.ECN(fourth.Tag) != 0 {
		t.Fatalf("the fourth claim %+v (%v): want another DSCP value, ECN 0", fourth, err)
	}
	if err := got[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := a.Acquire(ctx, "cell", time.Minute, nil)
	if err != nil || again.Tag != got[1].Tag {
		t.Fatalf("claim %+v (%v), want the variant given back, %s", again, err, dscp.Name(got[1].Tag))
	}
	for _, c := range []*Claim{fourth, again, got[2]} {
		if err := c.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := run.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(ctx, LeaseName(d), metav1.GetOptions{}); err != nil {
		t.Fatalf("the Lease of %d, still carried by a trace, went at Close: %v", d, err)
	}
	if err := got[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := leases.List(ctx, metav1.ListOptions{}); len(left.Items) != 0 {
		t.Fatalf("%d claims left after the last trace", len(left.Items))
	}
}

// A kept claim whose Lease is no longer the run's (deleted, then taken by
// another plugin) is never handed out again.
func TestKeptClaimLostIsNotReused(t *testing.T) {
	s, run, a, ctx := keepingRun(t, "run")
	run.renewEvery = 5 * time.Millisecond
	c, err := a.Acquire(ctx, "cell", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	waitFor(t, "the idle renewal to find the claim lost", c.held.c.lost.Load)
	got, err := a.Acquire(ctx, "next", time.Minute, nil)
	if err != nil || dscp.Value(got.Tag) == dscp.Value(c.Tag) {
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
// than the renewal period, is renewed all the same: the run renews it,
// whichever traces carry it (before, a matrix's claims were never
// renewed, expired 15 s into the run, and another plugin took them over
// while the run still traced with them).
func TestKeptClaimHandedOnIsRenewed(t *testing.T) {
	s, run, a, ctx := keepingRun(t, "run")
	const every = 40 * time.Millisecond
	run.renewEvery = every
	start := time.Now()
	var first *Claim
	for time.Since(start) < 10*every {
		c, err := a.Acquire(ctx, "cell", time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = c
		} else if c.held != first.held {
			t.Fatalf("claim %+v, want the kept one", c)
		}
		// A trace: its own Hold for a quarter of the period.
		hold, stop := context.WithTimeout(ctx, every/4)
		c.Hold(hold, time.Now)
		<-hold.Done()
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

// Yield deletes the claims the run keeps that no trace carries, so that
// another run may take the tags; claims released later are kept again.
func TestYieldGivesUpIdleClaims(t *testing.T) {
	s, run, a, ctx := keepingRun(t, "run")
	var busy []*Claim
	for range dscp.ECNVariants {
		c, err := a.Acquire(ctx, "busy", time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
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
	if _, err := leases.Get(ctx, busy[0].name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Lease its traces carry went with Yield: %v", err)
	}
	other, err := s.alloc().Acquire(ctx, "other", time.Minute, map[uint8]bool{dscp.Value(busy[0].Tag): true})
	if err != nil || other.Tag != idle.Tag {
		t.Fatalf("another plugin's claim %+v (%v), want the yielded tag %d", other, err, idle.Tag)
	}
	if err := busy[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	s.cs.ClearActions()
	if again, err := a.Acquire(ctx, "next", time.Minute, nil); err != nil || again.Tag != busy[0].Tag || len(s.cs.Actions()) != 0 {
		t.Fatalf("claim %+v (%v, %d API calls): a claim released after Yield must be kept", again, err, len(s.cs.Actions()))
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
