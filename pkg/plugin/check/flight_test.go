package check

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
)

// A run whose parallelism wants more tags than other plugins left it
// (here 2 of 6 slots' worth) runs at the pace of the tags it has: a trace
// that finds none free waits for one of the run's traces to end and tries
// again, instead of failing on and passing its slot to the next trace,
// which fails the same way (each such try asks the API server about every
// tag the run does not hold). Every trace is delivered, and the tries
// that found no tag stay a few per trace: a trace that ends wakes one
// waiter, whose try meets the trace started in its slot and those whose
// tries overlapped the end (58 to 98 for 60 traces in a few hundred runs under
// -race, some beside two busy loops; the bound asked is 3 a trace).
// Before, with a wait for tags as short as this test's, a run made
// hundreds of thousands of such tries.
func TestTraceWithoutATagWaitsForTheRunsNext(t *testing.T) {
	const n, free = 60, 2
	var mu sync.Mutex
	held, starvedTries, most := 0, 0, 0
	exhausted := fmt.Errorf("claim: %w", tagalloc.ErrExhausted)
	r := &Runner{Parallel: 6, Now: time.Now,
		Run: func(context.Context, Trace) Result {
			mu.Lock()
			if held == free {
				starvedTries++
				mu.Unlock()
				return Result{Ended: outcome.Ended{Verdict: outcome.Incomplete}, Code: exitcode.Setup, Err: exhausted}
			}
			held++
			most = max(most, held)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // the trace's own work, holding its tag
			mu.Lock()
			held--
			mu.Unlock()
			return Result{Ended: outcome.Ended{Verdict: outcome.Delivered}}
		},
		WaitTag: func(context.Context) bool { return true }}
	traces := make([]Trace, n)
	for i := range traces {
		traces[i] = Trace{Name: fmt.Sprint(i), Timeout: time.Minute}
	}
	for i, res := range r.RunAll(context.Background(), traces) {
		if res.Verdict != outcome.Delivered {
			t.Errorf("trace %d: %s (%v), want delivered", i, res.Verdict, res.Err)
		}
	}
	if starvedTries > 3*n {
		t.Errorf("%d tries found no tag for %d traces, want at most three per trace", starvedTries, n)
	}
	if most != free {
		t.Errorf("at most %d tags held at once, want the %d free", most, free)
	}
	t.Logf("%d tries found no tag", starvedTries)
}
