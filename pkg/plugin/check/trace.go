package check

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helpermode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tracerun"
)

// Tracing is how a suite's traces run: each through the trace runner, as
// `kubectl traceflow SRC DST` runs one, with the run's own options.
type Tracing struct {
	Clients *tracerun.Clients
	// Options apply to every trace; each case's timeout replaces
	// Options.Timeout. Options.Pool is set by ShareHelpers.
	Options tracerun.Options
	// Probe are the packet's settings for every trace (the trace
	// command's, under --all-endpoints).
	Probe tracerun.Probe
	// Suffix makes the random part of each record's name.
	Suffix func() string
}

// RunFunc returns the function that runs one trace of the suite: the same
// resolution result, record, engine choice and cleanup as a single trace.
// Its updates fold into the result's model; nothing is drawn.
func (tr *Tracing) RunFunc() RunFunc {
	return func(ctx context.Context, t Trace) Result {
		started := time.Now()
		opts := tr.Options
		opts.Timeout = t.Timeout
		if t.Case.RoundTrip {
			opts.RoundTrip = true
		}
		var mu sync.Mutex
		var model outcome.Model
		r := &tracerun.Runner{Clients: tr.Clients, Options: opts, Emit: func(u outcome.Update) {
			mu.Lock()
			defer mu.Unlock()
			model.Apply(u)
		}}
		end, err := r.Run(ctx, tracerun.Trace{Resolved: t.Result, Record: tracerun.Record(t.Result, tr.probe(t), opts.Timeout, tr.Suffix())})
		mu.Lock()
		m := model
		mu.Unlock()
		return result(ctx, t, err, Result{Ended: end, Model: &m, Started: started, Done: time.Now()})
	}
}

// TagPoll is how long a trace that found every tag taken at the end of a
// run waits before it asks again (WaitTag). The tags other plugins hold
// come free when their traces end, which only the API server can tell;
// asking every second costs a few requests while the run is starved.
const TagPoll = time.Second

// WaitTag is the runner's wait for a tag (Runner.WaitTag): it gives up
// the tags the run keeps idle, which a round trip could not use alone and
// another run may need, and waits TagPoll, or less where ctx ends.
func (tr *Tracing) WaitTag(ctx context.Context) bool {
	y, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = tr.Options.Tags.Yield(y) // a claim not deleted expires by itself
	cancel()
	t := time.NewTimer(TagPoll)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// probe is the packet of t: the run's, over IPv6 where the case's
// addresses say so.
func (tr *Tracing) probe(t Trace) tracerun.Probe {
	p := tr.Probe
	p.IPv6 = p.IPv6 || t.IPv6
	return p
}

// result completes res, which holds how the trace ended, with its exit
// code and error.
func result(ctx context.Context, t Trace, err error, res Result) Result {
	ended := res.Ended // as the runner said, before a missing verdict counts as Failed
	if res.Verdict == "" {
		res.Verdict = outcome.Failed
	}
	if err != nil && ctx.Err() != nil {
		// Interrupted: whatever failed after that (an API call cut
		// short) is not a cluster's failure; the trace did not complete.
		res.Verdict, res.Code = outcome.Incomplete, exitcode.Timeout
		res.Err = fmt.Errorf("interrupted before the trace completed (what it created was removed): %w", err)
		return res
	}
	if err != nil {
		res.Code, res.Err = exitcode.Of(err), err
		return res
	}
	// Without a reply this is ExitCode; a round trip's delivered probe
	// passes as the answer says.
	res.Code, res.Err = outcome.RoundTripExitCode(ended.Verdict, ended.Reply, t.Expect, ended.Destination)
	return res
}

// ShareHelpers gives the run a pool of helpers, one per node, and returns
// what removes it; where each trace starts its own (share false, the agent
// engine, no right to attach, or no REST config to attach with) it does
// nothing. Nothing is created until a helper-mode trace needs a node. run
// names the pool's pods; parallel is how many traces run at once.
func (tr *Tracing) ShareHelpers(ctx context.Context, share bool, traces []Trace, parallel int, run string) (closePool func() error) {
	c := tr.Clients
	if !share || tr.Options.Engine == "agent" || c.RESTConfig == nil || !tracerun.CanAttach(ctx, c.Kube, tr.Options.HelperNamespace) {
		return func() error { return nil }
	}
	longest, slots := time.Duration(0), 0
	for _, t := range traces {
		longest = max(longest, t.Timeout)
		slots += t.tags(parallel)
	}
	waves := (slots + parallel - 1) / max(parallel, 1)
	o := tr.Options
	pool := helpermode.NewPool(helpermode.PoolConfig{
		Cluster: helpermode.NewCluster(c.Kube, c.Streams, c.RESTConfig), Namespace: o.HelperNamespace,
		Image: o.HelperImage, OVSRunDir: o.OVSRunDir, OVNRunDir: o.OVNRunDir, Run: run,
		// Every wave may take a trace's timeout and start-up budget: the
		// deadline only matters should the plugin die without its attach
		// ending (the server stops when its standard input ends).
		Lifetime: time.Duration(waves) * (longest + helpermode.StartupBudget),
	})
	tr.Options.Pool = pool
	// The run keeps the tags its traces release, under its own name, for
	// its next traces (tagalloc.Local.Keep); they go with its helpers.
	o.Tags.Keep(ctx, run)
	forget := func() {}
	if o.Abandon != nil {
		forget = o.Abandon.Add(run)
	}
	return func() error {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err := errors.Join(pool.Close(c), o.Tags.Close(c))
		if err == nil {
			forget()
		}
		return err
	}
}
