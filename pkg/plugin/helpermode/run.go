package helpermode

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Config is how helper pods are run.
type Config struct {
	Namespace  string
	Image      string
	PullPolicy corev1.PullPolicy
	OVSRunDir  string
	// OVNRunDir is the nodes' OVN run directory ("" for /var/run/ovn).
	OVNRunDir string
	Bridge    string
	Timeout   time.Duration
	// Keep leaves the Traceflow record in place after the trace.
	Keep bool
	// ParallelStart attaches to every helper: its standard input says
	// when to start (a receiver at once, the sender once every receiver is
	// ready, so that the sender's pod starts together with theirs), and
	// its report comes back through the attach the moment it is written,
	// not once the kubelet serves the container's log (up to its 1 s
	// relist later). Otherwise the sender's pod starts once every receiver
	// is ready, and reports are read from the logs. It needs the right to
	// attach to pods.
	ParallelStart bool
	// Pool, when set, runs the trace's helpers on the nodes' shared
	// helpers (a check run's) instead of pods of the trace's own.
	Pool *Pool
	// AntreaAgentPorts maps a node to the port of the Antrea agent's API
	// there (its AntreaAgentInfo's apiPort): the node's helper asks that
	// agent to name the policy rules the probe meets.
	AntreaAgentPorts map[string]int
}

// Plan is one trace: where its helpers run and what the sender injects.
type Plan struct {
	Trace string
	// View is the start of the trace as the user sees it; the runner fills
	// in its time and tag.
	View outcome.TraceStarted
	// Sender is the source pod's node; Receivers the other nodes where the
	// packet may arrive through a tunnel.
	Sender     string
	Receivers  []string
	SenderArgs []string
	// Record is the trace record; with RecordAsCR it is created as a
	// Traceflow object and its status kept up to date (only where no
	// Antrea controller would act on it).
	Record     *traceflow.Traceflow
	RecordAsCR bool
}

// Runner runs helper-mode traces.
type Runner struct {
	Cluster Cluster
	Tags    *tagalloc.Allocator
	Records traceflow.Client
	Now     func() time.Time
	Emit    func(outcome.Update)
	// Explainer may name what dropped the probe (a NetworkPolicy and its
	// rule) where the helper could only name the table and flow; nil or a
	// failed lookup leaves the observation as it is.
	Explainer outcome.DropExplainer
	// Version is the plugin's version, to warn about a helper of another.
	Version string
	// InUse returns the tags held by other engines' traces; may be nil.
	InUse func(ctx context.Context) (map[uint8]bool, error)
	// SettleWait bounds the wait for stopped helpers to say their flows
	// are gone (0: settleWait).
	SettleWait time.Duration
	// NodeLease reads a node's Lease in kube-node-lease, the kubelet's
	// heartbeat, and ServerNow is the API server's clock to judge its age
	// by (Now when it has none yet). A nil NodeLease skips the check that
	// a helper's node has a running kubelet (nodelease.go).
	NodeLease func(ctx context.Context, node string) (*coordinationv1.Lease, error)
	ServerNow func() (time.Time, bool)
	// LeaseConfirm is how long the API server must have been answering
	// before a stale Lease counts as a stopped kubelet (0: a quarter of the
	// Lease's duration plus 2 s; see nodelease.go).
	LeaseConfirm time.Duration
}

// Outcome is how a trace ended.
type Outcome struct {
	Verdict outcome.Verdict
	Reason  string
	// Decided is the hop that decided the verdict (nil for Incomplete and
	// Failed).
	Decided *outcome.Hop
	Tag     uint8
	Results []report.NodeResult
	// Record is the final trace record (the object, or its in-memory form).
	Record *traceflow.Traceflow
}

// StartupBudget bounds the time to start the helpers, on top of the trace's
// own timeout; it matches the helper pods' activeDeadlineSeconds slack.
const StartupBudget = 60 * time.Second

// cleanupBudget bounds the deletions after the trace, Ctrl-C included.
const cleanupBudget = 5 * time.Second

// Run runs plan and removes what it created before returning, whatever
// happens: helper pods, the tag's claim and, unless cfg.Keep, the record.
func (r *Runner) Run(ctx context.Context, cfg Config, plan Plan) (out Outcome, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout+StartupBudget)
	defer cancel()
	// apiAway: the trace ended because the API server went away; the
	// cleanup then waits for it to come back (apiaway.go).
	apiAway := false
	budget := func() time.Duration {
		if apiAway {
			return apiAwayBudget
		}
		return cleanupBudget
	}
	cleanupCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), budget())
	}

	// The helpers' log streams and the watch on their pods outlive an
	// interrupted trace: stopping the helpers waits for their word that
	// their flows are gone (settle).
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	defer endLife()
	// The watches are opened while the tag is claimed and the record
	// written: the API server answers a watch only after a round trip of
	// its own (measured in the lab: 80 to 180 ms each, one after the other
	// before).
	opened := r.openWatches(ctx, life, cfg, plan)
	joined := false
	defer func() {
		if !joined {
			go func() { (<-opened).stop() }()
		}
	}()

	inUse := map[uint8]bool{}
	if r.InUse != nil {
		if inUse, err = r.InUse(ctx); err != nil {
			return out, exitcode.Errorf(exitcode.Setup, "find the tags of running traces: %w", err)
		}
	}
	claim, err := r.Tags.Acquire(ctx, plan.Trace, tagalloc.ClaimDuration, inUse)
	if errors.Is(err, tagalloc.ErrExhausted) {
		return out, exitcode.Errorf(exitcode.Setup, "%w: wait for them to finish, or run `kubectl traceflow cleanup` to free tags left by a killed plugin", err)
	}
	if err != nil {
		return out, apiFailure(err, "create", "leases.coordination.k8s.io", cfg.Namespace)
	}
	defer func() {
		c, cancel := cleanupCtx()
		defer cancel()
		err = errors.Join(err, whileAway(c, claim.Release))
	}()
	out.Tag = claim.Tag
	holdCtx, stopHold := context.WithCancel(ctx)
	defer stopHold() // before Release, which the defer above runs after this one
	go claim.Hold(holdCtx, r.Now)

	rec := newRecorder(r.Records, plan.Record, plan.RecordAsCR, cfg.Keep)
	started := plan.View
	started.Time, started.Tag = r.Now(), claim.Tag
	r.Emit(started)
	// The record is a by-product of the trace: a record that cannot be
	// written is a warning, never a different exit code.
	if serr := rec.start(ctx, claim.Tag, r.Now()); serr != nil && ctx.Err() != nil {
		rec.asCR = false // interrupted: the loop ends at once, the cleanup deletes what was made
	} else if serr != nil {
		rec.asCR = false
		r.warn("the trace record could not be created (%v); it stays in the plugin (see -o yaml)", recordProblem(serr, "create", "traceflows"))
	}
	defer func() {
		c, cancel := cleanupCtx()
		defer cancel()
		if cerr := whileAway(c, rec.cleanup); cerr != nil {
			r.warn("the trace record %s could not be deleted (%v): run `kubectl traceflow cleanup`", rec.tf.Name, recordProblem(cerr, "delete", "traceflows"))
		}
	}()

	// Watch before creating, so no status change of a helper is missed.
	w := <-opened
	joined = true
	defer w.stop()
	if w.err != nil {
		return out, w.err
	}
	pods, events := w.pods, w.events

	t := &tracer{r: r, cfg: cfg, plan: plan, tag: claim.Tag, mark: newMark(), rec: rec, life: life, pods: pods, lines: make(chan lineMsg, 16), helpers: map[string]*helper{},
		nodeWatches: map[string]context.CancelFunc{}, nodesDown: make(chan nodeDown),
		// A shared helper runs its part the moment it is handed it.
		parallel: cfg.ParallelStart && cfg.Pool == nil}
	defer func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget()+settleWait)
		defer cancel()
		if serr := t.settle(c); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	end := t.loop(ctx, pods, events)
	apiAway = end.apiAway
	out.Verdict, out.Reason, out.Decided, err = end.verdict, end.reason, end.decided, end.err
	out.Results = rec.results(true)
	if ferr := rec.finish(ctx, out.Verdict, out.Reason); ferr != nil {
		r.warn("the trace record's final status could not be written (%v); the verdict below stands", recordProblem(ferr, "update", "traceflows/status"))
	}
	r.Emit(outcome.Finished{At: outcome.At{Time: r.Now()}, Verdict: out.Verdict, Reason: out.Reason, Decided: out.Decided})
	out.Record = rec.tf
	return out, err
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

// openWatches opens the watches on plan's helper pods (for life) and on
// pod events (for ctx), both at once; a pool watches its own pods, so its
// traces get watches that never fire.
func (r *Runner) openWatches(ctx, life context.Context, cfg Config, plan Plan) <-chan watches {
	out := make(chan watches, 1)
	if cfg.Pool != nil {
		out <- watches{pods: watch.NewFake(), events: watch.NewFake()}
		return out
	}
	go func() {
		var w watches
		var eventsErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.events, eventsErr = r.Cluster.WatchEvents(ctx, cfg.Namespace)
		}()
		pods, podsErr := r.Cluster.WatchPods(life, cfg.Namespace, plan.Trace)
		<-done
		w.pods = pods
		switch {
		case podsErr != nil:
			w.err = apiFailure(podsErr, "watch", "pods", cfg.Namespace)
		case eventsErr != nil:
			w.err = apiFailure(eventsErr, "watch", "events", cfg.Namespace)
		}
		out <- w
	}()
	return out
}

// maxMark is the widest mark the helpers accept: an IPv6 flow label's 20
// bits (an IPv4 probe carries the low 16).
const maxMark = 0xfffff

// newMark draws a probe mark: 20 random bits (an IPv6 flow label), never 0,
// which would mean the tag's well-known default.
func newMark() uint32 {
	var b [4]byte
	for {
		_, _ = cryptorand.Read(b[:])
		if m := binary.BigEndian.Uint32(b[:]) & maxMark; m&0xffff != 0 {
			return m
		}
	}
}

func (r *Runner) warn(format string, a ...any) {
	r.Emit(outcome.Warning{At: outcome.At{Time: r.Now()}, Message: fmt.Sprintf(format, a...)})
}

// recordProblem says what stopped a record write, naming a missing verb.
func recordProblem(err error, verb, resource string) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("not allowed to %s %s.crd.antrea.io: %v", verb, resource, err)
	}
	return err.Error()
}

// ending is how the trace ends: returned by the handlers once the verdict
// (or a failure) is known, nil while the trace goes on.
type ending struct {
	verdict outcome.Verdict
	reason  string
	err     error
	// decided is the hop that decided the verdict, if one did.
	decided *outcome.Hop
	// apiAway: the trace ended because the API server went away.
	apiAway bool
}

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

type tracer struct {
	r    *Runner
	cfg  Config
	plan Plan
	tag  uint8
	// mark is the probe's mark, random per trace: with the tag alone a
	// pod could forge a packet the helpers count as the probe.
	mark uint32
	rec  *recorder
	// life outlives an interrupted trace, for settle: the helpers' logs
	// are followed and their pods watched (pods) until it ends.
	life    context.Context
	pods    watch.Interface
	lines   chan lineMsg
	helpers map[string]*helper // by pod name
	sender  *helper
	hops    []outcome.TimedHop
	// end is the hop where the packet's path ended, once one reported it.
	end *outcome.Hop
	// parallel: every helper is attached to (Config.ParallelStart): its
	// standard input carries its go, its standard output its report.
	parallel bool
	// nodeWatches stop the watch on each node's kubelet; nodesDown says
	// which node's kubelet has stopped.
	nodeWatches map[string]context.CancelFunc
	nodesDown   chan nodeDown
}

func (t *tracer) newHelper(node string, role helperpod.Role) *helper {
	name := helperpod.Name(t.plan.Trace, role, node)
	h := &helper{node: node, role: podRole(role), pod: name}
	h.goR, h.goW = io.Pipe()
	t.helpers[name] = h
	return h
}

// create starts a helper pod.
func (t *tracer) create(ctx context.Context, h *helper, role helperpod.Role) error {
	args := []string(nil)
	if role == helperpod.RoleSender {
		args = t.plan.SenderArgs
	}
	params := helperpod.Params{
		TraceName: t.plan.Trace, Namespace: t.cfg.Namespace, Node: h.node, Role: role,
		Image: t.cfg.Image, PullPolicy: t.cfg.PullPolicy, OVSRunDir: t.cfg.OVSRunDir, OVNRunDir: t.cfg.OVNRunDir,
		Bridge: t.cfg.Bridge, Tag: t.tag, Mark: t.mark, Timeout: t.cfg.Timeout, Args: args,
		WaitForGo: t.parallel, AntreaAgentPort: t.cfg.AntreaAgentPorts[h.node],
	}
	if t.cfg.Pool != nil {
		return t.startShared(h, params)
	}
	pod, err := helperpod.Build(params)
	if err != nil {
		return exitcode.Wrap(exitcode.Setup, err)
	}
	if err := t.r.Cluster.CreatePod(ctx, pod); err != nil {
		return apiFailure(err, "create", "pods", t.cfg.Namespace)
	}
	h.created, h.waiting = true, "scheduled"
	t.startNodeWatch(ctx, h.node)
	t.r.Emit(outcome.HelperWaiting{At: outcome.At{Time: t.r.Now()}, Node: h.node, Role: h.role, Reason: h.waiting})
	return nil
}

// loop starts the helpers (receivers first, the sender once every receiver
// is ready) and folds their reports until the verdict is known.
func (t *tracer) loop(ctx context.Context, pods, events watch.Interface) ending {
	receivers := append([]string(nil), t.plan.Receivers...)
	sort.Strings(receivers)
	for _, n := range receivers {
		if err := t.create(ctx, t.newHelper(n, helperpod.RoleReceiver), helperpod.RoleReceiver); err != nil {
			return ending{verdict: outcome.Failed, reason: err.Error(), err: err}
		}
	}
	t.sender = t.newHelper(t.plan.Sender, helperpod.RoleSender)
	if t.parallel {
		if err := t.create(ctx, t.sender, helperpod.RoleSender); err != nil {
			return ending{verdict: outcome.Failed, reason: err.Error(), err: err}
		}
	}
	if err := t.maybeStartSender(ctx); err != nil {
		return ending{verdict: outcome.Failed, reason: err.Error(), err: err}
	}
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ending{verdict: outcome.Incomplete, reason: "no verdict within the trace's timeout plus the helpers' start-up time"}
			}
			return ending{verdict: outcome.Incomplete, reason: "interrupted", err: exitcode.Errorf(exitcode.Timeout, "trace interrupted before it completed; its helper pods and tag were removed")}
		case e, ok := <-pods.ResultChan():
			if !ok {
				return ending{verdict: outcome.Failed, reason: "pod watch closed", apiAway: true,
					err: exitcode.Errorf(exitcode.Setup, "the API server closed the watch on helper pods (restarted or unreachable?): the plugin removes the trace's helper pods, tag claim and record once it answers again (within 30 s); run the trace again")}
			}
			if end := t.onPod(ctx, e); end != nil {
				return *end
			}
		case e, ok := <-events.ResultChan():
			if !ok {
				events = watch.NewEmptyWatch() // events are a nicety; carry on without them
				continue
			}
			if end := t.onEvent(ctx, e); end != nil {
				return *end
			}
		case m := <-t.lines:
			if end := t.onLine(ctx, m); end != nil {
				return *end
			}
		case d := <-t.nodesDown:
			if end := t.onNodeDown(d); end != nil {
				return *end
			}
		}
	}
}

// maybeStartSender lets the sender inject once every receiver is ready: it
// creates the sender, or, when the sender started in parallel, writes its
// go. No sleep: receivers say "ready" only after their flows are installed.
func (t *tracer) maybeStartSender(ctx context.Context) error {
	for _, h := range t.helpers {
		if h.role == report.RoleReceiver && !h.ready {
			return nil
		}
	}
	if !t.parallel {
		if t.sender.created {
			return nil
		}
		return t.create(ctx, t.sender, helperpod.RoleSender)
	}
	t.sendGo(t.sender)
	return nil
}

// sendGo writes a helper's go to its standard input, once. The write
// waits for the attach to read it. The input stays open: the attach
// carries the helper's report until it ends.
func (t *tracer) sendGo(h *helper) {
	if h.goSent {
		return
	}
	h.goSent = true
	go func() { _, _ = h.goW.Write([]byte("go\n")) }()
}

func (t *tracer) startShared(h *helper, params helperpod.Params) error {
	if err := t.cfg.Pool.Start(h.node, h.pod, helperpod.CommandArgs(params), params.AntreaAgentPort, t.lines); err != nil {
		return exitcode.Wrap(exitcode.Setup, err)
	}
	h.created, h.streaming = true, true
	if !t.cfg.Pool.Serving(h.node) {
		h.waiting = "waiting for the node's shared helper"
		t.r.Emit(outcome.HelperWaiting{At: outcome.At{Time: t.r.Now()}, Node: h.node, Role: h.role, Reason: h.waiting})
	}
	return nil
}

func (t *tracer) fail(h *helper, problem string) *ending {
	msg := fmt.Sprintf("helper on node %s: %s", h.node, problem)
	return &ending{verdict: outcome.Failed, reason: msg, err: exitcode.Errorf(exitcode.Setup, "%s", msg)}
}

func (t *tracer) onPod(ctx context.Context, e watch.Event) *ending {
	p, ok := e.Object.(*corev1.Pod)
	if !ok {
		return nil
	}
	h := t.helpers[p.Name]
	if h == nil || h.ended {
		return nil
	}
	if e.Type == watch.Deleted {
		return t.fail(h, "its pod was deleted before it reported (by `kubectl traceflow cleanup` or an operator?)")
	}
	problem, waiting := podProblem(p, t.cfg.Image)
	if problem != "" && !h.streaming {
		return t.fail(h, problem)
	}
	if waiting != "" && waiting != h.waiting && !h.ready {
		h.waiting = waiting
		t.r.Emit(outcome.HelperWaiting{At: outcome.At{Time: t.r.Now()}, Node: h.node, Role: h.role, Reason: waiting})
	}
	if started(p) {
		t.containerStarted(h)
	}
	return nil
}

// containerStarted follows the helper's log, or attaches to it, once its
// container runs. The kubelet's "Started" event says so at once; the pod's
// status can lag by a second or more, so whichever comes first starts it.
// A container is attached to as soon as it runs, where its log is served
// only once the kubelet's pod-lifecycle relist has seen it.
func (t *tracer) containerStarted(h *helper) {
	if h.streaming {
		return
	}
	h.streaming = true
	t.stopNodeWatch(h.node)
	if !t.parallel {
		go t.follow(t.life, t.cfg.Namespace, h.pod)
		return
	}
	go t.attach(t.life, h)
	if h.role == report.RoleReceiver {
		t.sendGo(h)
	} else if !h.ready && len(t.plan.Receivers) > 0 {
		h.waiting = "waiting for the receivers"
		t.r.Emit(outcome.HelperWaiting{At: outcome.At{Time: t.r.Now()}, Node: h.node, Role: h.role, Reason: h.waiting})
	}
}

func (t *tracer) onEvent(ctx context.Context, e watch.Event) *ending {
	ev, ok := e.Object.(*corev1.Event)
	if !ok {
		return nil
	}
	h := t.helpers[ev.InvolvedObject.Name]
	if h == nil || h.ready || h.ended {
		return nil
	}
	if ev.Reason == "Started" {
		t.containerStarted(h)
		return nil
	}
	runDir := t.cfg.OVSRunDir
	if runDir == "" {
		runDir = helperpod.DefaultOVSRunDir
	}
	problem, waiting := eventProblem(ev.Reason, ev.Message, runDir, t.cfg.Image)
	if problem != "" {
		return t.fail(h, problem)
	}
	if waiting != "" && waiting != h.waiting {
		h.waiting = waiting
		t.r.Emit(outcome.HelperWaiting{At: outcome.At{Time: t.r.Now()}, Node: h.node, Role: h.role, Reason: waiting})
	}
	return nil
}
