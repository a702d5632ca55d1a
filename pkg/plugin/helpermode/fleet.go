package helpermode

import (
	"context"
	"fmt"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
)

// fleet is where a trace's helpers run: pods of the trace's own (podFleet)
// or the shared helpers of a check run (poolFleet). The loop drives either
// through it, so that a trace's lifecycle is one piece of code, whichever
// runs its helpers; both deliver what the helpers say as lineMsgs on the
// loop's channel.
type fleet interface {
	// watch opens the watches on the helpers' pods and on the kubelets'
	// events about pods: the pods' for life (settle follows them after an
	// interrupt), the events' for ctx.
	watch(ctx, life context.Context) <-chan watches
	// start creates a helper (pod is its name, helperpod.Name); waiting is
	// what it waits for now, "" for nothing.
	start(ctx context.Context, pod string, p helperpod.Params) (waiting string, err error)
	// stream reads a helper's report into the loop once its container
	// runs: through an attach, whose input carries its go, or from its log.
	stream(pod string, attach bool)
	// sendGo tells a helper that waits for its go to start.
	sendGo(pod string)
	// closeInputs ends the standard input of the helpers whose go was not
	// sent (waitingOnly), or of every helper.
	closeInputs(waitingOnly bool)
	// stop asks the helpers that may still have flows to remove them: their
	// cleanup lines come to the loop.
	stop(ctx context.Context, unsettled []*helper) error
	// release lets the trace's helpers go for good.
	release(ctx context.Context, helpers []*helper) error
}

// podFleet runs a trace's helpers as pods of its own, labelled with the
// trace's name: a sweep by label removes them all at once.
type podFleet struct {
	cluster   Cluster
	namespace string
	trace     string
	// life outlives an interrupted trace, for settle: the helpers' reports
	// are read until it ends.
	life  context.Context
	lines chan<- lineMsg

	mu     sync.Mutex
	inputs map[string]*helperInput // by pod name
}

// helperInput is a helper's standard input, through an attach
// (Config.ParallelStart); sent: its go was written.
type helperInput struct {
	r    *io.PipeReader
	w    *io.PipeWriter
	sent bool
}

func newPodFleet(c Cluster, namespace, trace string, life context.Context, lines chan<- lineMsg) *podFleet {
	return &podFleet{cluster: c, namespace: namespace, trace: trace, life: life, lines: lines, inputs: map[string]*helperInput{}}
}

// watches are a trace's watches on its helper pods and on pod events.
type watches struct {
	pods, events watch.Interface
	err          error
}

func (w watches) stop() {
	if w.pods != nil {
		w.pods.Stop()
	}
	if w.events != nil {
		w.events.Stop()
	}
}

// watch opens both watches at once: the API server answers a watch only
// after a round trip of its own.
func (f *podFleet) watch(ctx, life context.Context) <-chan watches {
	out := make(chan watches, 1)
	go func() {
		var w watches
		var eventsErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.events, eventsErr = f.cluster.WatchEvents(ctx, f.namespace)
		}()
		pods, podsErr := f.cluster.WatchPods(life, f.namespace, f.trace)
		<-done
		w.pods = pods
		switch {
		case podsErr != nil:
			w.err = apiFailure(podsErr, "watch", "pods", f.namespace)
		case eventsErr != nil:
			w.err = apiFailure(eventsErr, "watch", "events", f.namespace)
		}
		out <- w
	}()
	return out
}

func (f *podFleet) start(ctx context.Context, name string, p helperpod.Params) (string, error) {
	pod, err := helperpod.Build(p)
	if err != nil {
		return "", exitcode.Wrap(exitcode.Setup, err)
	}
	in := &helperInput{}
	in.r, in.w = io.Pipe()
	f.mu.Lock()
	f.inputs[name] = in
	f.mu.Unlock()
	if err := f.cluster.CreatePod(ctx, pod); err != nil {
		return "", apiFailure(err, "create", "pods", f.namespace)
	}
	return "scheduled", nil
}

func (f *podFleet) input(pod string) *helperInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inputs[pod]
}

// stream reads the report for life: the input an attach carries was made
// with the pod, in start.
func (f *podFleet) stream(pod string, attach bool) {
	if attach {
		go f.attach(f.life, pod)
		return
	}
	go f.follow(f.life, pod)
}

// sendGo writes the go, once; the write waits for the attach to read it.
// The input stays open: the attach carries the helper's report until it
// ends.
func (f *podFleet) sendGo(pod string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.inputs[pod]
	if in == nil || in.sent {
		return
	}
	in.sent = true
	go func() { _, _ = in.w.Write([]byte("go\n")) }()
}

func (f *podFleet) closeInputs(waitingOnly bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.inputs {
		if !waitingOnly || !in.sent {
			_ = in.w.Close()
		}
	}
}

// stop asks the kubelets to stop every helper pod of the trace (SIGTERM),
// the ones whose flows are gone already included: one call for all.
func (f *podFleet) stop(ctx context.Context, _ []*helper) error {
	return whileAway(ctx, func(c context.Context) error { return f.cluster.StopPods(c, f.namespace, f.trace) })
}

func (f *podFleet) release(ctx context.Context, _ []*helper) error {
	err := whileAway(ctx, func(c context.Context) error { return f.cluster.DeletePods(c, f.namespace, f.trace) })
	if err != nil {
		return fmt.Errorf("delete helper pods (run `kubectl traceflow cleanup`): %w", err)
	}
	return nil
}

// poolFleet runs a trace's helpers as parts of a check run's shared
// helpers: the pool watches its own pods, so the trace's watches never
// fire, and a part streams its lines from the moment it is handed over.
type poolFleet struct {
	pool  *Pool
	lines chan<- lineMsg
}

func (f poolFleet) watch(context.Context, context.Context) <-chan watches {
	out := make(chan watches, 1)
	out <- watches{pods: watch.NewFake(), events: watch.NewFake()}
	return out
}

func (f poolFleet) start(_ context.Context, name string, p helperpod.Params) (string, error) {
	if err := f.pool.Start(p.Node, name, helperpod.CommandArgs(p), p.AntreaAgentPort, f.lines); err != nil {
		return "", exitcode.Wrap(exitcode.Setup, err)
	}
	if !f.pool.Serving(p.Node) {
		return "waiting for the node's shared helper", nil
	}
	return "", nil
}

// stream, sendGo and closeInputs have nothing to do: a shared helper's
// lines flow from the start, and it runs a part the moment it is handed it.
func (poolFleet) stream(string, bool) {}
func (poolFleet) sendGo(string)       {}
func (poolFleet) closeInputs(bool)    {}

func (f poolFleet) stop(_ context.Context, unsettled []*helper) error {
	for _, h := range unsettled {
		f.pool.Stop(h.node, h.pod)
	}
	return nil
}

// release stops the delivery of the trace's lines; the pool removes its
// pods when the run ends.
func (f poolFleet) release(_ context.Context, helpers []*helper) error {
	for _, h := range helpers {
		if h.created {
			f.pool.Forget(h.node, h.pod)
		}
	}
	return nil
}
