package check

import (
	"context"
	"errors"
	"sync"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
)

// flight is a run's traces in flight, for the traces that find every tag
// taken. Where other plugins hold part of the pool, the run holds fewer
// tags than its parallelism wants: a trace started beside the run's others
// finds none free. The next trace in its slot failed the same way, and the
// next, so the run churned through its cells, pushing each to its end,
// each failed try having asked the API server about every tag the run
// does not hold (tagalloc.ExhaustedFor cuts those askings). So
// such a trace waits for one of the run's traces to end, whose tags come
// back to the run (tagalloc.Local.Keep) or to the pool, and tries once
// more; one waiter per trace that ends. Where none of the run's traces is
// in flight, nothing of the run's will come back: the trace goes on to
// the end of the run (RunAll's again).
type flight struct {
	mu sync.Mutex
	// running counts the traces in Run; ended counts those that ended
	// other than for want of a tag.
	running, ended int
	waiters        []chan struct{}
}

// begin marks a trace in Run, and returns the count of ended traces, for
// its wait should it find no tag.
func (f *flight) begin() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running++
	return f.ended
}

// end marks a trace out of Run. One that had its tags lets the first
// waiter try again; once none is in flight, every waiter does (and finds
// nothing of the run's will come back).
func (f *flight) end(starved bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running--
	if !starved {
		f.ended++
		if len(f.waiters) > 0 {
			close(f.waiters[0])
			f.waiters = f.waiters[1:]
		}
	}
	if f.running == 0 {
		for _, w := range f.waiters {
			close(w)
		}
		f.waiters = nil
	}
}

// wait waits, after a trace that began when ended was since found every
// tag taken, for another trace of the run to end. It reports false where
// none is in flight (nothing of the run's will come back) or ctx ended.
func (f *flight) wait(ctx context.Context, since int) bool {
	f.mu.Lock()
	if f.ended > since {
		f.mu.Unlock()
		return true // one ended while this trace tried
	}
	if f.running == 0 {
		f.mu.Unlock()
		return false
	}
	w := make(chan struct{})
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
	select {
	case <-w:
		return true
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, o := range f.waiters {
			if o == w {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				break
			}
		}
		return false
	}
}

// runInFlight runs t, and again each time it found every tag taken while
// others of the run were in flight and one of them has ended since.
func (r *Runner) runInFlight(ctx context.Context, f *flight, t Trace) Result {
	for {
		since := f.begin()
		res := r.Run(ctx, t)
		starved := errors.Is(res.Err, tagalloc.ErrExhausted)
		f.end(starved)
		if !starved || !f.wait(ctx, since) {
			return res
		}
	}
}
