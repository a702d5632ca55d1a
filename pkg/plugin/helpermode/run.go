package helpermode

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
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
	SenderArgs report.ProbeArgs
	// RoundTrip follows the destination's answer back to the source, with
	// a second tag.
	RoundTrip bool
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
	// Ended is how every trace ends, whichever engine ran it.
	outcome.Ended
	Tag uint8
	// ReplyTag is the answer's tag, for a round trip.
	ReplyTag uint8
	Results  []report.NodeResult
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
	cl := &cleanups{ctx: ctx}

	// The helpers' streams and the watch on their pods outlive an
	// interrupted trace: stopping the helpers waits for their word that
	// their flows are gone (settle).
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	defer endLife()
	lines := make(chan lineMsg, 16)
	var fl fleet = newPodFleet(r.Cluster, cfg.Namespace, plan.Trace, life, lines)
	if cfg.Pool != nil {
		fl = poolFleet{pool: cfg.Pool, lines: lines}
	}
	// The watches are opened while the tag is claimed and the record
	// written: the API server answers a watch only after a round trip of
	// its own (measured in the lab: 80 to 180 ms each, one after the other
	// before).
	opened := fl.watch(ctx, life)
	joined := false
	defer func() {
		if !joined {
			go func() { (<-opened).stop() }()
		}
	}()

	claim, err := r.claimTag(ctx, cfg, plan.Trace, 0, "wait for them to finish, or run `kubectl traceflow cleanup` to free tags left by a killed plugin")
	if err != nil {
		return out, err
	}
	defer func() {
		c, cancel := cl.context(0)
		defer cancel()
		err = errors.Join(err, whileAway(c, claim.Release))
	}()
	out.Tag = claim.Tag
	holdCtx, stopHold := context.WithCancel(ctx)
	defer stopHold() // before Release, which the defer above runs after this one
	go claim.Hold(holdCtx, r.Now)
	releaseReply, err := r.replyTag(ctx, holdCtx, cfg, plan, claim.Tag, &out)
	if err != nil {
		return out, err
	}
	defer func() { err = errors.Join(err, releaseReply(cl)) }()

	rec := r.startRecord(ctx, cfg, plan, claim.Tag)
	defer func() {
		c, cancel := cl.context(0)
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
	t := newTracer(r, cfg, plan, claim.Tag, rec, fl, lines, w.pods)
	t.replyTag = out.ReplyTag
	defer func() {
		c, cancel := cl.context(settleWait)
		defer cancel()
		if serr := t.settle(c); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	end := t.loop(ctx, w.pods, w.events)
	cl.apiAway = end.apiAway
	return r.finish(ctx, rec, out, end)
}

// cleanups bound the deletions after the trace: cleanupBudget, or
// apiAwayBudget when the trace ended because the API server went away
// (the cleanup then waits for it to come back, apiaway.go).
type cleanups struct {
	ctx     context.Context
	apiAway bool
}

// context is for a cleanup step, with extra time on top of the budget;
// it outlives the trace's own context, Ctrl-C included.
func (c *cleanups) context(extra time.Duration) (context.Context, context.CancelFunc) {
	budget := cleanupBudget
	if c.apiAway {
		budget = apiAwayBudget
	}
	return context.WithTimeout(context.WithoutCancel(c.ctx), budget+extra)
}

// claimTag claims a tag no other trace holds, under holder; also is a
// tag this trace holds already (0: none), and why says what to do where
// the pool is exhausted.
func (r *Runner) claimTag(ctx context.Context, cfg Config, holder string, also uint8, why string) (*tagalloc.Claim, error) {
	inUse := map[uint8]bool{}
	if r.InUse != nil {
		var err error
		if inUse, err = r.InUse(ctx); err != nil {
			return nil, exitcode.Errorf(exitcode.Setup, "find the tags of running traces: %w", err)
		}
	}
	if also != 0 {
		inUse[also] = true
	}
	claim, err := r.Tags.Acquire(ctx, holder, tagalloc.ClaimDuration, inUse)
	if errors.Is(err, tagalloc.ErrExhausted) {
		return nil, exitcode.Errorf(exitcode.Setup, "%w: %s", err, why)
	}
	if err != nil {
		return nil, apiFailure(err, "create", "leases.coordination.k8s.io", cfg.Namespace)
	}
	return claim, nil
}

// replyTag claims and holds the answer's tag of a round trip (into
// out.ReplyTag) and returns what releases it; without a round trip it
// claims nothing.
func (r *Runner) replyTag(ctx, holdCtx context.Context, cfg Config, plan Plan, probeTag uint8, out *Outcome) (func(*cleanups) error, error) {
	if !plan.RoundTrip {
		return func(*cleanups) error { return nil }, nil
	}
	// The answer's claim is a second one under the trace's name.
	claim, err := r.claimTag(ctx, cfg, plan.Trace+"-reply", probeTag,
		"a round trip needs two tags; wait for other traces to finish, trace without --round-trip, or run `kubectl traceflow cleanup` to free tags left by a killed plugin")
	if err != nil {
		return nil, err
	}
	out.ReplyTag = claim.Tag
	holdCtx, stopHold := context.WithCancel(holdCtx)
	go claim.Hold(holdCtx, r.Now)
	return func(cl *cleanups) error {
		stopHold()
		c, cancel := cl.context(0)
		defer cancel()
		return whileAway(c, claim.Release)
	}, nil
}

// startRecord shows the trace's start and writes its record. The record
// is a by-product of the trace: a record that cannot be written is a
// warning, never a different exit code.
func (r *Runner) startRecord(ctx context.Context, cfg Config, plan Plan, tag uint8) *recorder {
	rec := newRecorder(r.Records, plan.Record, plan.RecordAsCR, cfg.Keep)
	started := plan.View
	started.Time, started.Tag = r.Now(), tag
	r.Emit(started)
	if serr := rec.start(ctx, tag, r.Now()); serr != nil && ctx.Err() != nil {
		rec.asCR = false // interrupted: the loop ends at once, the cleanup deletes what was made
	} else if serr != nil {
		rec.asCR = false
		r.warn("the trace record could not be created (%v); it stays in the plugin (see -o yaml)", recordProblem(serr, "create", "traceflows"))
	}
	return rec
}

// finish writes the record's final status and shows the verdict.
func (r *Runner) finish(ctx context.Context, rec *recorder, out Outcome, end ending) (Outcome, error) {
	out.Verdict, out.Reason, out.Decided, out.Reply = end.verdict, end.reason, end.decided, end.reply
	out.Results = rec.results(true)
	if ferr := rec.finish(ctx, out.Verdict, out.Reason, out.Reply); ferr != nil {
		r.warn("the trace record's final status could not be written (%v); the verdict below stands", recordProblem(ferr, "update", "traceflows/status"))
	}
	r.Emit(outcome.Finished{At: outcome.At{Time: r.Now()}, Verdict: out.Verdict, Reason: out.Reason, Decided: out.Decided, Reply: out.Reply})
	out.Record = rec.tf
	return out, end.err
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
