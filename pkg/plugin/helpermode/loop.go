package helpermode

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// ending is how the trace ends: set by the machine once the verdict (or a
// failure) is known.
type ending struct {
	verdict outcome.Verdict
	reason  string
	err     error
	// decided is the hop that decided the verdict, if one did.
	decided *outcome.Hop
	// apiAway: the trace ended because the API server went away.
	apiAway bool
	// reply is the answer's fate, for a round trip whose probe was
	// delivered (reply.go); replyDone: the round trip's end is decided,
	// with reply nil where the answer was not followed.
	reply     *outcome.ReplyEnd
	replyDone bool
}

// lineMsg is what a helper's stream says, for the helper named pod.
type lineMsg struct {
	pod  string
	line report.Line
	// text is a line that is not a report line; eof ends the stream;
	// attachErr says the go could not be sent to the sender; problem says
	// why a shared helper (Pool) cannot run this trace's part.
	text      string
	eof       error
	attachErr error
	problem   string
}

// tracer runs one trace's machine: it turns what the cluster and the
// helpers say into events, and carries out the machine's effects through
// the trace's fleet.
type tracer struct {
	r    *Runner
	cfg  Config
	plan Plan
	tag  uint8
	// replyTag is the answer's tag, for a round trip (0: none).
	replyTag uint8
	m        *machine
	fleet    fleet
	rec      *recorder
	// mark is the probe's mark, random per trace: with the tag alone a
	// pod could forge a packet the helpers count as the probe.
	mark uint32
	// pods is the watch on the helper pods, followed until settled.
	pods  watch.Interface
	lines chan lineMsg
	// nodeWatches stop the watch on each node's kubelet; nodesDown says
	// which node's kubelet has stopped.
	nodeWatches map[string]context.CancelFunc
	nodesDown   chan nodeDown
}

func newTracer(r *Runner, cfg Config, plan Plan, tag uint8, rec *recorder, fl fleet, lines chan lineMsg, pods watch.Interface) *tracer {
	m := newMachine(machineConfig{
		trace: plan.Trace, sender: plan.Sender, receivers: plan.Receivers,
		// A shared helper runs its part the moment it is handed it.
		parallel: cfg.ParallelStart && cfg.Pool == nil, shared: cfg.Pool != nil,
		namespace: cfg.Namespace, image: cfg.Image, ovsRunDir: cfg.OVSRunDir, version: r.Version,
		timeout: cfg.Timeout, dstKind: plan.View.DestinationKind, roundTrip: plan.RoundTrip,
		outside: plan.SenderArgs.SourceOutside, replyTranslated: plan.SenderArgs.ReplyTranslated,
	})
	return &tracer{r: r, cfg: cfg, plan: plan, tag: tag, m: m, fleet: fl, rec: rec, mark: newMark(), pods: pods, lines: lines,
		nodeWatches: map[string]context.CancelFunc{}, nodesDown: make(chan nodeDown)}
}

// loop starts the helpers and feeds the machine until the trace has
// ended.
func (t *tracer) loop(ctx context.Context, pods, events watch.Interface) ending {
	t.do(ctx, evBegin{now: t.r.Now()})
	for t.m.ended == nil {
		select {
		case <-ctx.Done():
			t.do(ctx, evDone{deadline: errors.Is(ctx.Err(), context.DeadlineExceeded)})
		case e, ok := <-pods.ResultChan():
			if !ok {
				t.do(ctx, evPodWatchClosed{})
				continue
			}
			t.do(ctx, evPod{now: t.r.Now(), e: e})
		case e, ok := <-events.ResultChan():
			if !ok {
				// Events are a nicety: carry on without them, on a watch that
				// never fires (an empty watch is closed, and would spin the loop).
				events = watch.NewFake()
				continue
			}
			if ev, ok := e.Object.(*corev1.Event); ok {
				t.do(ctx, evKubelet{now: t.r.Now(), ev: ev})
			}
		case msg := <-t.lines:
			t.do(ctx, t.lineEvent(ctx, msg))
		case d := <-t.nodesDown:
			t.do(ctx, evNodeDown{down: d})
		}
	}
	return *t.m.ended
}

// lineEvent is the event of a line. A dropped probe the helper could name
// only by its table and flow may be a Kubernetes NetworkPolicy's
// isolation, which the Explainer names from the policies in the API: it is
// asked here, since the machine does no I/O.
func (t *tracer) lineEvent(ctx context.Context, msg lineMsg) evLine {
	ev := evLine{now: t.r.Now(), msg: msg}
	if hop, explain, ok := t.m.observation(msg); ok && explain && t.r.Explainer != nil {
		hop.Observation = t.r.Explainer.ExplainDrop(ctx, t.m.hops, hop.Observation)
		ev.hop = &hop
	}
	return ev
}

// do steps the machine with ev and carries out its effects, in order; a
// create's result goes back into the machine at once, before anything
// else the loop may have seen meanwhile.
func (t *tracer) do(ctx context.Context, ev event) {
	for _, e := range t.m.step(ev) {
		switch e := e.(type) {
		case effCreate:
			waiting, err := t.fleet.start(ctx, e.pod, t.params(e))
			t.do(ctx, evCreated{now: t.r.Now(), pod: e.pod, waiting: waiting, err: err})
		case effStream:
			t.fleet.stream(e.pod, e.attach)
		case effSendGo:
			t.fleet.sendGo(e.pod)
		case effWatchNode:
			t.startNodeWatch(ctx, e.node)
		case effUnwatchNode:
			t.stopNodeWatch(e.node)
		case effEmit:
			t.r.Emit(e.u)
		case effRecord:
			t.rec.add(e.hop, e.at)
		case effEnd:
			// Nothing to do here: the loop ends on the machine's ended,
			// and Run settles the helpers.
		}
	}
}

// params are the helper's pod (or part, on a shared helper).
func (t *tracer) params(e effCreate) helperpod.Params {
	var probe report.ProbeArgs
	if e.role == helperpod.RoleSender {
		probe = t.plan.SenderArgs
	}
	return helperpod.Params{
		TraceName: t.plan.Trace, Namespace: t.cfg.Namespace, Node: e.node, Role: e.role,
		Image: t.cfg.Image, PullPolicy: t.cfg.PullPolicy, OVSRunDir: t.cfg.OVSRunDir, OVNRunDir: t.cfg.OVNRunDir,
		Bridge: t.cfg.Bridge, Tag: t.tag, ReplyTag: t.replyTag, Mark: t.mark, Timeout: t.cfg.Timeout, Probe: probe,
		WaitForGo: t.m.parallel, AntreaAgentPort: t.cfg.AntreaAgentPorts[e.node],
	}
}
