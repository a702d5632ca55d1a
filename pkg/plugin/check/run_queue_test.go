package check

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Round trips whose answers are caught by source address and kind alone
// (UDP, ICMP) run one at a time per source; TCP round trips, one-way
// traces and other sources' run beside them. Enough slots for all: only
// the queues hold traces back.
func TestRoundTripsWithICMPAnswersQueueBySource(t *testing.T) {
	trace := func(src string, proto traceflow.Protocol, roundTrip bool) Trace {
		return Trace{Case: Case{RoundTrip: roundTrip},
			Result: &resolve.Result{Source: resolve.Endpoint{Kind: resolve.KindPod, IP: netip.MustParseAddr(src)}, Protocol: proto}}
	}
	a, b := "10.244.1.2", "10.244.1.3"
	traces := []Trace{
		trace(a, traceflow.UDP, true), trace(a, traceflow.ICMP, true), trace(a, traceflow.UDP, true), trace(a, traceflow.ICMP, true),
		trace(a, traceflow.TCP, true), trace(a, traceflow.TCP, true), trace(a, traceflow.TCP, true),
		trace(b, traceflow.UDP, true), trace(b, traceflow.UDP, true),
		trace(a, traceflow.UDP, false),
	}
	for i := range traces {
		traces[i].Name = strconv.Itoa(i)
	}
	var mu sync.Mutex
	inQueue := map[string]int{}
	entered := make(chan string)
	release := map[string]chan struct{}{}
	for _, tr := range traces {
		release[tr.Name] = make(chan struct{})
	}
	r := &Runner{Parallel: 2 * len(traces), Now: time.Now, Run: func(_ context.Context, tr Trace) Result {
		q := tr.answerQueue()
		mu.Lock()
		if q != "" {
			inQueue[q]++
			if inQueue[q] > 1 {
				t.Errorf("trace %s runs while another round trip from %s with ICMP answers does", tr.Name, q)
			}
		}
		mu.Unlock()
		entered <- tr.Name
		<-release[tr.Name]
		mu.Lock()
		if q != "" {
			inQueue[q]--
		}
		mu.Unlock()
		return Result{Ended: outcome.Ended{Verdict: outcome.Verdict(tr.Name)}}
	}}
	done := make(chan []Result, 1)
	go func() { done <- r.RunAll(context.Background(), traces) }()
	next := func() Trace {
		select {
		case name := <-entered:
			n, _ := strconv.Atoi(name)
			return traces[n]
		case <-time.After(time.Minute): // ends a hung wait only
			t.Fatal("no trace started: the runner holds back more than the queues do")
		}
		return Trace{}
	}
	// At once: one queued from a, one from b, the three TCP round trips
	// and the one-way trace.
	var queued []Trace
	for range 6 {
		if tr := next(); tr.answerQueue() != "" {
			queued = append(queued, tr)
		} else {
			close(release[tr.Name])
		}
	}
	if len(queued) != 2 || queued[0].answerQueue() == queued[1].answerQueue() {
		t.Fatalf("first wave: %d queued round trips, want one from each source", len(queued))
	}
	// Each queued one that ends lets the next from its own source start,
	// and nothing else: 3 more from a, 1 from b.
	remaining := map[string]int{a: 3, b: 1}
	for len(queued) > 0 {
		q := queued[0].answerQueue()
		close(release[queued[0].Name])
		queued = queued[1:]
		if remaining[q] > 0 {
			remaining[q]--
			tr := next()
			if tr.answerQueue() != q {
				t.Errorf("trace %s (queue %q) started when a round trip from %s ended", tr.Name, tr.answerQueue(), q)
			}
			queued = append(queued, tr)
		}
	}
	rs := <-done
	for i, res := range rs {
		if string(res.Verdict) != traces[i].Name {
			t.Errorf("result %d is %q", i, res.Verdict)
		}
	}
	for _, tc := range []struct {
		tr   Trace
		want string
	}{
		{trace(a, traceflow.UDP, true), a},
		{trace(a, traceflow.ICMP, true), a},
		{trace(a, traceflow.TCP, true), ""},
		{trace(a, traceflow.UDP, false), ""},
		{Trace{Case: Case{RoundTrip: true}, Result: &resolve.Result{Protocol: traceflow.UDP,
			Source: resolve.Endpoint{Kind: resolve.KindNode, Name: "tf-node-1", Node: "tf-node-1"}}}, "node /tf-node-1 on tf-node-1"},
	} {
		if got := tc.tr.answerQueue(); got != tc.want {
			t.Errorf("queue of %+v: %q, want %q", tc.tr.Result, got, tc.want)
		}
	}
}

// A trace that finds every tag taken (other plugins hold the rest of the
// pool) tries again: as one of the run's traces in flight ends (flight),
// and at the latest once every other trace has ended; only a failure
// then is its result. (Which of the two comes first depends on timing: 1
// may get its tag either way; 4 never does, and its last try comes after
// every other trace's.)
func TestTraceWithoutATagRunsAgainAtTheEnd(t *testing.T) {
	traces := make([]Trace, 6)
	for i := range traces {
		traces[i].Name = strconv.Itoa(i)
	}
	exhausted := fmt.Errorf("claim: %w: wait for them to finish", tagalloc.ErrExhausted)
	var mu sync.Mutex
	var order []string
	tries := map[string]int{}
	r := &Runner{Parallel: 2, Now: time.Now, Run: func(_ context.Context, tr Trace) Result {
		mu.Lock()
		defer mu.Unlock()
		tries[tr.Name]++
		order = append(order, tr.Name)
		if tr.Name == "1" && tries["1"] == 1 || tr.Name == "4" {
			return Result{Ended: outcome.Ended{Verdict: outcome.Incomplete}, Code: exitcode.Setup, Err: exhausted}
		}
		return Result{Ended: outcome.Ended{Verdict: outcome.Delivered}}
	}}
	var ends []int
	r.Progress = func(i int, res *Result) {
		if res != nil {
			ends = append(ends, i)
		}
	}
	results := r.RunAll(context.Background(), traces)
	if results[1].Verdict != outcome.Delivered || tries["1"] != 2 {
		t.Errorf("trace 1: %+v after %d tries, want delivered on its second", results[1], tries["1"])
	}
	if !errors.Is(results[4].Err, tagalloc.ErrExhausted) || tries["4"] < 2 {
		t.Errorf("trace 4: %+v after %d tries, want the exhaustion after two or more", results[4], tries["4"])
	}
	lastOf4 := -1
	for i, name := range order {
		if name == "4" {
			lastOf4 = i
		}
	}
	for _, other := range []string{"0", "2", "3", "5"} {
		if i := slices.Index(order, other); i < 0 || i > lastOf4 {
			t.Errorf("tries in order %v: trace 4's last try must come after every other trace's", order)
		}
	}
	if len(ends) != len(traces) {
		t.Errorf("%d results reported for %d traces: %v", len(ends), len(traces), ends)
	}
}

// A trace that finds every tag taken again at the end of the run waits
// (WaitTag) and tries again until it gets its tags, for up to its own
// timeout; such traces wait one at a time.
func TestStarvedTraceWaitsForATag(t *testing.T) {
	traces := []Trace{{Name: "a", Timeout: time.Minute}, {Name: "b", Timeout: time.Minute}, {Name: "never", Timeout: 50 * time.Millisecond}}
	exhausted := fmt.Errorf("claim: %w", tagalloc.ErrExhausted)
	var mu sync.Mutex
	tries, waiting, most := map[string]int{}, 0, 0
	r := &Runner{Parallel: 4, Now: time.Now,
		Run: func(_ context.Context, tr Trace) Result {
			mu.Lock()
			defer mu.Unlock()
			tries[tr.Name]++
			// a and b get their tags on their fourth try; never never does.
			if tr.Name == "never" || tries[tr.Name] < 4 {
				return Result{Ended: outcome.Ended{Verdict: outcome.Incomplete}, Code: exitcode.Setup, Err: exhausted}
			}
			return Result{Ended: outcome.Ended{Verdict: outcome.Delivered}}
		},
		WaitTag: func(ctx context.Context) bool {
			mu.Lock()
			waiting++
			most = max(most, waiting)
			mu.Unlock()
			defer func() { mu.Lock(); waiting--; mu.Unlock() }()
			select {
			case <-ctx.Done():
				return false
			case <-time.After(time.Millisecond):
				return true
			}
		}}
	results := r.RunAll(context.Background(), traces)
	for _, i := range []int{0, 1} {
		if results[i].Verdict != outcome.Delivered || tries[traces[i].Name] != 4 {
			t.Errorf("trace %s: %+v after %d tries, want delivered on the fourth", traces[i].Name, results[i], tries[traces[i].Name])
		}
	}
	if !errors.Is(results[2].Err, tagalloc.ErrExhausted) || tries["never"] < 3 {
		t.Errorf("trace never: %+v after %d tries, want the exhaustion once its 50ms were up", results[2], tries["never"])
	}
	if most != 1 {
		t.Errorf("%d traces waited for tags at once, want one at a time", most)
	}
}

// A trace interrupted while it waits for a tag says it was interrupted
// (exit 3, as the traces not started say), not that every tag was taken
// (a setup failure, exit 4, which would outrank the interruption in the
// run's exit code).
func TestTagWaitInterruptedSaysSo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exhausted := fmt.Errorf("claim: %w", tagalloc.ErrExhausted)
	r := &Runner{Parallel: 2, Now: time.Now,
		Run: func(context.Context, Trace) Result {
			return Result{Ended: outcome.Ended{Verdict: outcome.Incomplete}, Code: exitcode.Setup, Err: exhausted}
		},
		WaitTag: func(wctx context.Context) bool {
			cancel() // Ctrl-C while the first starved trace waits
			<-wctx.Done()
			return false
		}}
	results := r.RunAll(ctx, []Trace{{Name: "a", Timeout: time.Minute}, {Name: "b", Timeout: time.Minute}})
	for i, res := range results {
		if errors.Is(res.Err, tagalloc.ErrExhausted) || res.Code != exitcode.Timeout || res.Verdict != outcome.Incomplete ||
			res.Err == nil || !strings.Contains(res.Err.Error(), "interrupted") {
			t.Errorf("trace %d: code %d, verdict %s, %v; want exit %d, incomplete, interrupted", i, res.Code, res.Verdict, res.Err, exitcode.Timeout)
		}
	}
}

// A starved trace whose turn comes tries at once before it waits: the
// starved trace before it may have just ended, its tags idle in the run's
// keeping, which a wait would give up (the second of two matrices at once
// took 11 s for 12 cells, a wait of a second each, after the first had
// ended and its tags were free).
func TestStarvedTraceTriesAtOnceFirst(t *testing.T) {
	exhausted := fmt.Errorf("claim: %w", tagalloc.ErrExhausted)
	var mu sync.Mutex
	tries, waits := map[string]int{}, 0
	r := &Runner{Parallel: 2, Now: time.Now,
		Run: func(_ context.Context, tr Trace) Result {
			mu.Lock()
			defer mu.Unlock()
			tries[tr.Name]++
			if tries[tr.Name] < 3 { // the first try, and the one at the end of the run
				return Result{Ended: outcome.Ended{Verdict: outcome.Incomplete}, Code: exitcode.Setup, Err: exhausted}
			}
			return Result{Ended: outcome.Ended{Verdict: outcome.Delivered}}
		},
		WaitTag: func(context.Context) bool {
			mu.Lock()
			defer mu.Unlock()
			waits++
			return true
		}}
	for i, res := range r.RunAll(context.Background(), []Trace{{Name: "a", Timeout: time.Minute}, {Name: "b", Timeout: time.Minute}}) {
		if res.Verdict != outcome.Delivered {
			t.Errorf("trace %d: %s (%v), want delivered", i, res.Verdict, res.Err)
		}
	}
	if waits != 0 {
		t.Errorf("%d waits for a tag, want none: each starved trace's first try found one", waits)
	}
}
