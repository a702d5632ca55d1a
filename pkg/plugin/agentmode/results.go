package agentmode

// Reading Antrea's results: node results as hops in path order, and a
// failed or timed-out trace as the part that is missing and why.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

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
