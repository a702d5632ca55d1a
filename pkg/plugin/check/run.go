package check

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Result is how one trace of a suite ended.
type Result struct {
	// Ended is how the trace ended, as the trace runner says.
	outcome.Ended
	// Code is the trace's own exit code: 0 when it met its expectation.
	Code exitcode.Code
	// Err says why Code is not 0.
	Err error
	// Model is the trace as the view saw it: its hops, for reports.
	Model         *outcome.Model
	Started, Done time.Time
}

// Passed reports whether the trace met its expectation.
func (r Result) Passed() bool { return r.Code == exitcode.OK }

// Message says what happened in one sentence: where the packet's path
// ended (node, table, flow, policy) and, on failure, what was expected. A
// round trip's also says which way decided it (roundTripMessage).
func (r Result) Message(t Trace) string {
	if t.Case.RoundTrip {
		return r.roundTripMessage(t)
	}
	return r.probeMessage()
}

// probeMessage is Message of the probe's way alone.
func (r Result) probeMessage() string {
	var where string
	if r.Decided != nil {
		where = outcome.Describe(r.Verdict, *r.Decided, r.destinationKind())
		if r.Decided.Inferred() {
			where += " (predicted by OVS's trace, not observed)"
		}
	}
	switch {
	case r.Passed():
		return where
	case r.Err != nil && where != "":
		return r.Err.Error() + ": " + where
	case r.Err != nil:
		return r.Err.Error()
	}
	return where
}

func (r Result) destinationKind() outcome.DestinationKind {
	if r.Model == nil {
		return ""
	}
	return r.Model.Trace.DestinationKind
}

// RunFunc runs one trace and reports how it ended; it removes what it
// created before returning, interrupted or not.
type RunFunc func(ctx context.Context, t Trace) Result

// Runner runs a suite's traces concurrently.
type Runner struct {
	// Parallel is how many tags the running traces hold at once: a trace
	// holds one, a round trip two (the answer's too). No more than the tag
	// pool holds, so that no trace fails for want of a tag.
	Parallel int
	Run      RunFunc
	Now      func() time.Time
	// WaitTag, if set, waits before a trace that found every tag taken
	// at the end of the run tries again (Tracing.WaitTag), and reports
	// false where ctx ended first.
	WaitTag func(ctx context.Context) bool
	// Progress, if set, hears of every trace that starts (r is nil) and
	// ends; calls come from the runner's goroutines, one at a time.
	Progress func(i int, r *Result)
}

// RunAll runs traces and returns their results in the same order. A
// trace not started when ctx ends counts as not completed (exit 3).
//
// The traces that find every tag taken (other plugins' runs hold the rest
// of the pool) and find none when they try again as the run's other
// traces end (flight) are the run's again: they run once more when every
// other trace has ended, when the run's tags are idle (a run keeps them,
// tagalloc.Local.Keep) and serve them without asking; only a trace that
// fails so a second time is reported so. Where the run holds too few tags
// for even one (another run took the pool first), those traces wait for
// tags one at a time, each for up to its own timeout (starved).
func (r *Runner) RunAll(ctx context.Context, traces []Trace) []Result {
	results := make([]Result, len(traces))
	sem := make(chan struct{}, max(r.Parallel, 1))
	var mu sync.Mutex
	report := func(i int, res *Result) {
		if r.Progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		r.Progress(i, res)
	}
	var wg sync.WaitGroup
	queues := map[string]*sync.Mutex{}
	// again: see the doc comment.
	var again []int
	var starved sync.Mutex
	fl := &flight{}
	start := func(i int, last bool) {
		slots := traces[i].tags(cap(sem))
		var queue *sync.Mutex
		if k := traces[i].answerQueue(); k != "" {
			if queues[k] == nil {
				queues[k] = &sync.Mutex{}
			}
			queue = queues[k]
		}
		if !acquire(ctx, sem, slots) {
			now := r.Now()
			results[i] = Result{Ended: outcome.Ended{Verdict: outcome.Incomplete}, Code: exitcode.Timeout, Started: now, Done: now,
				Err: errors.New("not run: the check was interrupted before this trace started")}
			report(i, &results[i])
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				for range slots {
					<-sem
				}
			}()
			if queue != nil {
				queue.Lock()
				defer queue.Unlock()
			}
			report(i, nil)
			res := r.runInFlight(ctx, fl, traces[i])
			if last && errors.Is(res.Err, tagalloc.ErrExhausted) && r.WaitTag != nil {
				starved.Lock()
				res = r.untilTagged(ctx, traces[i], res)
				starved.Unlock()
			}
			if !last && errors.Is(res.Err, tagalloc.ErrExhausted) {
				mu.Lock()
				again = append(again, i)
				mu.Unlock()
				return
			}
			results[i] = res
			report(i, &res)
		}()
	}
	for i := range traces {
		start(i, false)
	}
	wg.Wait()
	sort.Ints(again)
	for _, i := range again {
		start(i, true)
	}
	wg.Wait()
	return results
}

// untilTagged runs t again until it no longer finds every tag taken
// (res says it did): first without a wait, then waiting (WaitTag) before each try,
// for up to t's timeout (20 s where it has none); then res is the last
// try's, or an interrupted trace's where ctx ended while it waited.
func (r *Runner) untilTagged(ctx context.Context, t Trace, res Result) Result {
	limit := t.Timeout
	if limit <= 0 {
		limit = 20 * time.Second
	}
	waiting, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// First at once: the starved trace before it may have just ended, its
	// tags idle in the run's keeping (WaitTag would give them up).
	res = r.Run(ctx, t)
	for errors.Is(res.Err, tagalloc.ErrExhausted) && r.WaitTag(waiting) {
		res = r.Run(ctx, t)
	}
	if errors.Is(res.Err, tagalloc.ErrExhausted) && ctx.Err() != nil {
		// Interrupted while it waited: what it met is the interruption,
		// not a failed setup (exit 3, as for the traces not started).
		return Result{Ended: outcome.Ended{Verdict: outcome.Incomplete}, Code: exitcode.Timeout, Started: res.Started, Done: r.Now(),
			Err: errors.New("not run: the check was interrupted while this trace waited for a dataplane tag")}
	}
	return res
}

// acquire takes n slots of sem, and reports false if ctx ended first
// (the slots it took then stay taken: nothing starts after that).
func acquire(ctx context.Context, sem chan struct{}, n int) bool {
	for range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}

// tags is how many of the runner's slots t takes: the tags it holds, one
// for the probe and, on a round trip, one for the answer; never more than
// parallel, so that a run of one at a time still runs it.
func (t Trace) tags(parallel int) int {
	if t.Case.RoundTrip {
		return min(2, max(parallel, 1))
	}
	return 1
}

// answerQueue names the queue a round trip waits in, "" for none. The
// answers to UDP probes and pings (an ICMP port unreachable, an echo
// reply) are caught by their source address and kind alone: OpenFlow
// cannot match the echo's identifier or the probe an ICMP error quotes.
// Two such round trips from one source at once contend for one catch on
// each node (the helpers' catch keys), and the one that waits longest goes
// on without it and cannot say what came back. So they run one at a time
// per source; the others, and TCP round trips (caught by their own source
// port), run beside them.
func (t Trace) answerQueue() string {
	if !t.Case.RoundTrip || t.Result == nil || (t.Result.Protocol != traceflow.UDP && t.Result.Protocol != traceflow.ICMP) {
		return ""
	}
	src := t.Result.Source
	if src.IP.IsValid() {
		return src.IP.String()
	}
	return fmt.Sprintf("%s %s/%s on %s", src.Kind, src.Namespace, src.Name, src.Node)
}

// Code is the exit code of a whole run: 0 when every trace met its
// expectation, else the worst of theirs, 4 before 3 before 2.
func Code(results []Result) exitcode.Code {
	worst := exitcode.OK
	for _, r := range results {
		worst = max(worst, rank(r.Code))
	}
	return worst
}

// rank makes a usage error inside a running suite a setup failure: exit 1
// promises that nothing was created, which a started suite cannot.
func rank(c exitcode.Code) exitcode.Code {
	if c == exitcode.Usage {
		return exitcode.Setup
	}
	return c
}
