// Package agentmode runs a trace through Antrea: it creates the Traceflow
// object, watches it (no polling) while Antrea's controller and agents fill
// its status, turns each new observation into a view update, and deletes
// the object at the end unless asked to keep it.
//
// What real Antrea (v2.3.2) writes, and this package reads: results carry
// no role, and their order varies (the receiver's often comes first); the
// dataplane tag is removed from the status when the trace succeeds; the
// receiver's first observation is {Forwarding, Received} without
// componentInfo; Delivered names no pod.
package agentmode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Runner runs agent-mode traces.
type Runner struct {
	Records traceflow.Client
	Now     func() time.Time
	Emit    func(outcome.Update)
	// SourceNode is the node of the source pod, where the sender's result
	// comes from when its observations do not say so themselves.
	SourceNode string
	// Slack is how long past the trace's own timeout to wait for Antrea's
	// controller to write the final phase (default 10 s).
	Slack time.Duration
	// Explainer names the policy behind a drop that Antrea leaves unnamed
	// (a Kubernetes NetworkPolicy's default deny); nil leaves it unnamed.
	Explainer outcome.DropExplainer
	// Blind says why Antrea's agents will not see this trace's end (a
	// Service without endpoints; engine.Facts.AgentBlind): a trace that
	// times out with no end seen says it, and what to do.
	Blind string
}

// Outcome is how the trace ended.
type Outcome struct {
	Verdict outcome.Verdict
	Reason  string
	// Decided is the hop that decided the verdict (nil for Incomplete and
	// Failed).
	Decided *outcome.Hop
	// Resumed counts the watches that ended early (expired, or "Too large
	// resource version" where etcd sends no progress notifications) and
	// were resumed.
	Resumed int
}

// Run creates tf and follows it to its end.
func (r *Runner) Run(ctx context.Context, tf *traceflow.Traceflow, started outcome.TraceStarted, keep bool) (out Outcome, err error) {
	timeout := time.Duration(tf.Spec.Timeout) * time.Second
	if timeout <= 0 {
		timeout = traceflow.DefaultTimeoutSeconds * time.Second
	}
	slack := r.Slack
	if slack == 0 {
		slack = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+slack)
	defer cancel()

	created, err := r.Records.Create(ctx, tf)
	if err != nil {
		return out, apiFailure(err, "create")
	}
	defer func() {
		if keep {
			return
		}
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if derr := r.Records.Delete(c, created.Name); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, fmt.Errorf("delete Traceflow %s: %w", created.Name, derr))
		}
	}()
	started.Time = r.Now()
	r.Emit(started)

	f := &follower{r: r, name: created.Name, nodes: map[string]*nodeSeen{}, dst: started.DestinationKind}
	end := f.follow(ctx, created)
	out.Verdict, out.Reason, out.Decided, out.Resumed = end.verdict, end.reason, f.decided, f.resumed
	r.Emit(outcome.Finished{At: outcome.At{Time: r.Now()}, Verdict: out.Verdict, Reason: out.Reason, Decided: out.Decided})
	return out, end.err
}

// ending is how following the record ended.
type ending struct {
	verdict outcome.Verdict
	reason  string
	err     error
}

type follower struct {
	r    *Runner
	name string
	// nodes are the nodes whose results were seen, in order of appearance.
	nodes   map[string]*nodeSeen
	order   []string
	running bool
	tag     int8
	dst     outcome.DestinationKind
	// decided is the hop that decided the verdict, once Antrea finished.
	decided *outcome.Hop
	resumed int
}

// nodeSeen is what was shown of one node's result.
type nodeSeen struct {
	role report.Role
	hops []outcome.TimedHop
}

// follow watches the record from obj, the object as created, to its end.
//
// The watch starts at obj's resourceVersion, the revision of the
// Traceflow's own creation: the API server's watch cache reaches it with
// the creation event itself, so the watch needs no progress notification
// from etcd (a watch without a resourceVersion waits for one, and where
// etcd sends none the API server ends it after 3 s with "Too large
// resource version"). Every status write after the creation comes as an
// event. Where a watch ends anyway (410 Gone, too large a resourceVersion,
// a closed connection), the record is listed again from the watch cache
// (resourceVersion 0, which needs no progress notification either) and
// watched from the list's resourceVersion: whatever was written before
// that version is in the list, whatever after it comes as an event, so no
// update is lost.
func (f *follower) follow(ctx context.Context, obj *traceflow.Traceflow) ending {
	if end, done := f.apply(ctx, obj); done {
		return end
	}
	rv := obj.ResourceVersion
	for {
		w, err := f.r.Records.Watch(ctx, f.name, rv)
		if err != nil {
			if ctx.Err() != nil {
				return f.expired(ctx)
			}
			if !resumable(err) {
				return ending{outcome.Failed, "watch failed", apiFailure(err, "watch")}
			}
		} else {
			var end ending
			var done bool
			end, done, err = f.consume(ctx, w)
			w.Stop()
			if done {
				return end
			}
		}
		// The watch ended early: resume from a fresh list. Resumes come
		// further apart each time (from 50 ms, at most 1 s), so that an API
		// server refusing every watch at once is not asked again in a loop.
		f.resumed++
		select {
		case <-ctx.Done():
			return f.expired(ctx)
		case <-time.After(min(50*time.Millisecond<<min(f.resumed-1, 5), time.Second)):
		}
		tf, listRV, lerr := f.r.Records.Relist(ctx, f.name)
		if lerr != nil {
			if ctx.Err() != nil {
				return f.expired(ctx)
			}
			return ending{outcome.Failed, "relist failed", exitcode.Errorf(exitcode.Setup, "the watch on Traceflow %s ended (%v) and listing it again failed: %w", f.name, err, lerr)}
		}
		if tf != nil {
			if end, done := f.apply(ctx, tf); done {
				return end
			}
		}
		rv = listRV
	}
}

// consume reads w until the trace ends (done) or the watch does: then it
// says why the watch ended.
func (f *follower) consume(ctx context.Context, w watch.Interface) (end ending, done bool, why error) {
	for {
		select {
		case <-ctx.Done():
			return f.expired(ctx), true, nil
		case e, ok := <-w.ResultChan():
			if !ok {
				return ending{}, false, errors.New("the API server closed the watch")
			}
			switch e.Type {
			case watch.Error:
				err := apierrors.FromObject(e.Object)
				if !resumable(err) {
					return ending{outcome.Failed, "watch error", exitcode.Errorf(exitcode.Setup, "watching the Traceflow: %v", err)}, true, nil
				}
				return ending{}, false, err
			case watch.Bookmark:
				continue
			}
			tf, err := traceflow.FromObject(e.Object)
			if err != nil {
				continue
			}
			if e.Type == watch.Deleted {
				return ending{outcome.Failed, "deleted", exitcode.Errorf(exitcode.Setup, "Traceflow %s was deleted before it finished", tf.Name)}, true, nil
			}
			if end, done := f.apply(ctx, tf); done {
				return end, true, nil
			}
		}
	}
}

// resumable reports whether a watch that failed with err can go on from a
// fresh list: its resourceVersion expired (410 Gone), or was too large for
// the watch cache, which waited for etcd to say it had caught up and gave
// up (504, "Too large resource version": etcd without progress
// notifications), or the API server timed the watch out.
func resumable(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)
}

// expired is the ending when the context ran out.
func (f *follower) expired(ctx context.Context) ending {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if !f.running {
			// Antrea leaves a trace without a phase while all its
			// dataplane tags are taken, retrying in the background.
			msg := "Antrea never started the trace: all its dataplane tags may be held by running traces, or antrea-controller is not processing Traceflows"
			return ending{outcome.Failed, msg, exitcode.Errorf(exitcode.Setup, "%s; retry later, check the antrea-controller logs, or use --engine helper", msg)}
		}
		return ending{outcome.Incomplete, "Antrea did not finish the trace within its timeout", nil}
	}
	return ending{outcome.Incomplete, "interrupted", exitcode.Errorf(exitcode.Timeout, "trace interrupted before Antrea finished it")}
}

// apply shows what tf adds and says whether the trace ended.
func (f *follower) apply(ctx context.Context, tf *traceflow.Traceflow) (ending, bool) {
	if tf.Status.DataplaneTag > 0 && f.tag == 0 {
		// Antrea removes the tag when the trace succeeds: keep the first.
		f.tag = tf.Status.DataplaneTag
		f.r.Emit(outcome.Tagged{At: outcome.At{Time: f.r.Now()}, Tag: uint8(tf.Status.DataplaneTag)})
	}
	final := tf.Status.Phase == traceflow.PhaseSucceeded || tf.Status.Phase == traceflow.PhaseFailed
	f.emitNew(ctx, tf, final)
	switch tf.Status.Phase {
	case traceflow.PhaseRunning:
		f.running = true
	case traceflow.PhaseSucceeded:
		hops := f.path()
		v, at := outcome.Decide(hops)
		if at == nil {
			return ending{v, "Antrea finished the trace, but no observation says where the packet's path ended", nil}, true
		}
		f.decided = at
		return ending{v, outcome.Describe(v, *at, f.dst), nil}, true
	case traceflow.PhaseFailed:
		v, reason, err := failure(tf.Status.Reason)
		if v == outcome.Incomplete {
			// Antrea times a trace out when the sender's or the
			// receiver's result is missing, even where an agent saw
			// the packet's end: an agent's status write can be lost
			// (lostWrite). What an agent saw is the packet's fate; the
			// missing part is said.
			if dv, at := outcome.Decide(f.path()); at != nil {
				f.decided = at
				return ending{dv, outcome.Describe(dv, *at, f.dst) + "; " + f.missing(tf.Status.Reason), nil}, true
			}
			reason = f.reported(reason)
		}
		return ending{v, reason, err}, true
	}
	return ending{}, false
}

// lostWrite is why an agent's result can be missing although its agent
// saw the packet: Antrea v2.3.2's agent writes its result with an update
// that it retries on a conflict five times, 10 ms apart, each time from its
// informer's cache (HandlePacketIn in pkg/agent/controller/traceflow). When
// the other node's agent wrote first and that write reaches the cache later
// than that, the result is dropped and logged as "PacketIn handler failed
// to process packet". The lab measured the second write of an inter-node
// trace up to 47 ms after the first.
const lostWrite = "an agent's result is lost when two agents write at once and its retries (5 within about 50 ms) read a stale cache; its log says \"PacketIn handler failed to process packet\""

// missing says whose part a trace that Antrea timed out lacks.
func (f *follower) missing(reason string) string {
	if f.senderSeen() {
		return fmt.Sprintf("Antrea ended the trace with %q before every agent reported", reason)
	}
	sender := "the source pod's node"
	if f.r.SourceNode != "" {
		sender = f.r.SourceNode
	}
	return fmt.Sprintf("the sender's hops are missing: Antrea ended the trace with %q before the agent on %s reported (%s)", reason, sender, lostWrite)
}

// reported says, for a trace Antrea timed out with no end in sight, which
// agents reported.
func (f *follower) reported(reason string) string {
	if f.r.Blind != "" {
		return reason + "; " + f.r.Blind + ": trace with --engine helper (or auto) to see where the packet ends"
	}
	if len(f.order) == 0 {
		return reason + "; no agent reported"
	}
	return fmt.Sprintf("%s; only the agent on %s reported, and none saw the packet's end: the packet may have been lost on its way, or another agent's result was lost (%s)", reason, strings.Join(f.order, ", "), lostWrite)
}

// path is every hop in path order: the sender's first, then the others in
// order of appearance.
func (f *follower) path() []outcome.TimedHop {
	var hops []outcome.TimedHop
	for _, sender := range []bool{true, false} {
		for _, n := range f.order {
			if s := f.nodes[n]; (s.role == report.RoleSender) == sender {
				hops = append(hops, s.hops...)
			}
		}
	}
	return hops
}

// roleOf tells the sender from a receiver by what its agent saw, never by
// the order of results or a role field (Antrea sets none): a receiver's
// first observation is the packet arriving (Received, from the tunnel or
// the gateway); a sender's is the packet leaving its pod (SpoofGuard, the
// first table a pod's packet passes). Anything else is the sender where it
// comes from the source pod's node.
func (f *follower) roleOf(res report.NodeResult) report.Role {
	first := res.Observations[0]
	switch {
	case first.Action.Normalize() == report.ActionReceived:
		return report.RoleReceiver
	case first.Component == report.ComponentSpoofGuard:
		return report.RoleSender
	case res.Role != "":
		return res.Role
	case res.Node == f.r.SourceNode:
		return report.RoleSender
	}
	return report.RoleReceiver
}

// emitNew turns observations not yet shown into view updates, in path
// order: the sender's before the receivers'. Antrea's agents write their
// results in whatever order their packet-ins came (the receiver's first
// in about half the inter-node traces), so a receiver's result is held
// back until the sender's is in, or the trace is final: shown earlier, its
// hops would come before the injection they follow, timed from the
// trace's start. A drop that Antrea leaves unnamed is explained on its
// way (the Explainer), with the hops before it in path order, a Service's
// translation included.
func (f *follower) emitNew(ctx context.Context, tf *traceflow.Traceflow, final bool) {
	now := f.r.Now()
	var senders, receivers []report.NodeResult
	for _, res := range tf.Status.Results {
		if len(res.Observations) == 0 {
			continue
		}
		res.Role = f.roleOf(res)
		if s := f.nodes[res.Node]; s != nil {
			res.Role = s.role // decided once, at the node's first observation
		}
		if res.Role == report.RoleSender {
			senders = append(senders, res)
		} else {
			receivers = append(receivers, res)
		}
	}
	if len(senders) == 0 && !f.senderSeen() && !final {
		receivers = nil
	}
	for _, res := range append(senders, receivers...) {
		f.emitResult(ctx, res, now)
	}
}

// senderSeen reports whether the sender's result has been shown.
func (f *follower) senderSeen() bool {
	for _, s := range f.nodes {
		if s.role == report.RoleSender {
			return true
		}
	}
	return false
}

// emitResult shows the observations of res not yet shown.
func (f *follower) emitResult(ctx context.Context, res report.NodeResult, now time.Time) {
	s := f.nodes[res.Node]
	if s == nil {
		s = &nodeSeen{role: res.Role}
		f.nodes[res.Node] = s
		f.order = append(f.order, res.Node)
		f.r.Emit(outcome.HelperReady{At: outcome.At{Time: now}, Node: res.Node, Role: s.role, Version: "antrea-agent"})
		if s.role == report.RoleSender {
			f.r.Emit(outcome.Injected{At: outcome.At{Time: now}, Node: res.Node})
		}
	}
	if len(res.Observations) <= len(s.hops) {
		// Nothing new. A list shorter than what was shown (a status
		// rewritten by another writer, an older object from a relist)
		// neither panics nor shows its hops a second time.
		return
	}
	for _, o := range res.Observations[len(s.hops):] {
		o.Action = o.Action.Normalize()
		if o.Action == report.ActionDropped && o.NetworkPolicy == "" && f.r.Explainer != nil {
			o = f.r.Explainer.ExplainDrop(ctx, f.path(), o)
		}
		h := outcome.Hop{Node: res.Node, Role: s.role, Observation: o, TableName: o.ComponentInfo}
		s.hops = append(s.hops, outcome.TimedHop{Hop: h, At: now})
		f.r.Emit(outcome.Observed{At: outcome.At{Time: now}, Hop: h})
	}
}

// failure maps Antrea's failure reasons to verdicts and exit codes.
func failure(reason string) (outcome.Verdict, string, error) {
	lower := strings.ToLower(reason)
	switch {
	case strings.Contains(lower, "timeout"):
		return outcome.Incomplete, "Antrea: " + reason, nil
	case strings.Contains(lower, "exceed") || strings.Contains(lower, "dataplane tag"):
		msg := "Antrea has no free dataplane tag (too many traces at once): retry when running traces finish, or use --engine helper"
		return outcome.Failed, msg, exitcode.Errorf(exitcode.Setup, "%s (Antrea: %s)", msg, reason)
	default:
		msg := "Antrea could not run the trace: " + reason
		return outcome.Failed, msg, exitcode.Errorf(exitcode.Setup, "%s; check the antrea-controller and antrea-agent logs", msg)
	}
}

func apiFailure(err error, verb string) error {
	if apierrors.IsForbidden(err) {
		return exitcode.Errorf(exitcode.Setup, "not allowed to %s traceflows.crd.antrea.io: grant it (see the README's RBAC section): %w", verb, err)
	}
	return exitcode.Errorf(exitcode.Setup, "%s Traceflow: %w", verb, err)
}
