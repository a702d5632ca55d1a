package helpermode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// onLine folds one line of a helper's report into the trace.
func (t *tracer) onLine(ctx context.Context, m lineMsg) *ending {
	h := t.helpers[m.pod]
	if h == nil {
		return nil
	}
	t.noteSettled(h, m)
	if h.ended {
		return nil
	}
	switch {
	case m.problem != "":
		return t.fail(h, "its node's shared helper "+m.problem)
	case m.attachErr != nil:
		if h.ready {
			return nil // the go got through: the stream just ended badly
		}
		return t.fail(h, fmt.Sprintf("cannot attach to it to start it and read its report: %v (the plugin needs create on pods/attach in namespace %s)", m.attachErr, t.cfg.Namespace))
	case m.eof != nil:
		h.ended = true
		if h.result == nil && !errors.Is(m.eof, io.EOF) && serverAway(m.eof) {
			msg := fmt.Sprintf("helper on node %s: its log stream through the API server broke (%v) before it reported (the API server restarted or is unreachable?): the plugin removes the trace's helper pods, tag claim and record once it answers again (within 30 s); run the trace again", h.node, m.eof)
			return &ending{verdict: outcome.Failed, reason: msg, apiAway: true, err: exitcode.Errorf(exitcode.Setup, "%s", msg)}
		}
		if h.result == nil {
			why := "its output ended without a result"
			if !errors.Is(m.eof, io.EOF) {
				why = m.eof.Error()
			}
			if len(h.noise) > 0 {
				why += ": " + strings.Join(h.noise, " | ")
			}
			return t.fail(h, why+" (check the helper image and the node's OVS)")
		}
		return t.checkDone()
	case m.text != "":
		h.addNoise(m.text)
		return nil
	}
	l := m.line
	at := l.Time
	if at.IsZero() {
		at = t.r.Now()
	}
	switch l.Type {
	case report.TypeReady:
		h.ready, h.waiting, h.cookie = true, "", l.Ready.Cookie
		t.r.Emit(outcome.HelperReady{At: outcome.At{Time: at}, Node: h.node, Role: h.role, Version: l.Ready.HelperVersion})
		if v := l.Ready.HelperVersion; t.r.Version != "" && v != "" && v != t.r.Version {
			t.r.Emit(outcome.Warning{At: outcome.At{Time: at}, Node: h.node, Message: fmt.Sprintf(
				"helper %s differs from plugin %s: the report format may not match; use --helper-image with the plugin's version", v, t.r.Version)})
		}
		if n := l.Ready.Naming; n != "" {
			t.r.Emit(outcome.Warning{At: outcome.At{Time: at}, Node: h.node, Message: n})
		}
		if h == t.sender {
			// The sender injects as soon as its flows are in: its ready
			// line is the moment of injection, give or take microseconds.
			t.r.Emit(outcome.Injected{At: outcome.At{Time: at}, Node: h.node})
			return nil
		}
		if err := t.maybeStartSender(ctx); err != nil {
			return &ending{verdict: outcome.Failed, reason: err.Error(), err: err}
		}
	case report.TypeObservation:
		hop := hopFrom(h.node, h.role, l)
		// A rule of an Antrea-native policy is known on the node by its
		// conjunction id only: its policy is unknown, and says why. Other
		// policy drops may be Kubernetes NetworkPolicies' isolation, which
		// the Explainer names from the policies in the API.
		if o, named := outcome.NameAntreaRule(t.hops, hop); named {
			hop.Observation = o
		} else if hop.Observation.Action == report.ActionDropped && hop.Observation.NetworkPolicy == "" && t.r.Explainer != nil {
			hop.Observation = t.r.Explainer.ExplainDrop(ctx, t.hops, hop.Observation)
		}
		t.hops = append(t.hops, outcome.TimedHop{Hop: hop, At: at})
		t.r.Emit(outcome.Observed{At: outcome.At{Time: at}, Hop: hop})
		t.rec.add(hop, at)
		if _, ends := outcome.OfAction(hop.Observation.Action); ends {
			t.end = &hop
			// A helper's lines arrive in order, so the sender's own end is
			// final at once; a receiver's waits for the sender's report to
			// be complete, because the two logs race to the plugin.
			return t.checkDone()
		}
	case report.TypeResult:
		h.result, h.ended = l.Result, true
		return t.checkDone()
	case report.TypeError:
		return t.fail(h, l.Error.Message)
	}
	return nil
}

// checkDone ends the trace once no helper can still report its end: every
// helper has ended, or the sender has and its packet went into no tunnel
// and did not leave the pod network on its way to a pod or Service (a
// destination routed through the gateway arrives on its node's gateway,
// where that node's receiver catches it).
func (t *tracer) checkDone() *ending {
	if t.end != nil && (t.end.Node == t.sender.node || t.sender.ended) && !t.mayArriveElsewhere() {
		return t.decided()
	}
	if !t.sender.ended {
		return nil
	}
	tunnelled := t.mayArriveElsewhere()
	for _, h := range t.hops {
		if h.Node == t.sender.node && h.Observation.TunnelDstIP != "" {
			tunnelled = true
		}
	}
	if tunnelled {
		for _, h := range t.helpers {
			if h.created && !h.ended {
				return nil
			}
		}
	}
	if v, _ := outcome.Decide(t.pathHops()); v != outcome.Incomplete {
		return t.decided()
	}
	reason := fmt.Sprintf("the probe was not seen on %s within %s", t.sender.node, t.cfg.Timeout)
	if tunnelled {
		reason = fmt.Sprintf("the probe went into the tunnel on %s but no receiver reported it within %s: check the underlay between the nodes", t.sender.node, t.cfg.Timeout)
	} else if len(t.hops) > 0 {
		last := t.hops[len(t.hops)-1]
		reason = fmt.Sprintf("the probe's last hop was %s %s on %s and nothing after it within %s", last.Observation.Component, last.Observation.Action, last.Node, t.cfg.Timeout)
	}
	return &ending{verdict: outcome.Incomplete, reason: reason}
}

// pathHops are the hops in path order: the sender's first, then the
// receivers', each node's in the order it reported them. Arrival order is
// not path order: two helpers' logs race to the plugin, and a receiver's
// Delivered may come in before the sender's own last hop.
func (t *tracer) pathHops() []outcome.TimedHop {
	hops := slices.Clone(t.hops)
	slices.SortStableFunc(hops, func(a, b outcome.TimedHop) int {
		return cmp.Compare(b2i(a.Node != t.sender.node), b2i(b.Node != t.sender.node))
	})
	return hops
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mayArriveElsewhere reports whether the sender's packet left the pod
// network for a destination on it while a receiver still waits: the
// packet may yet arrive on the destination's node, routed by the hosts.
func (t *tracer) mayArriveElsewhere() bool {
	if t.end == nil || t.end.Node != t.sender.node || t.end.Observation.Action.Normalize() != report.ActionForwardedOutOfNetwork ||
		outcome.ReachedDestination(outcome.ForwardedOutOfNetwork, t.plan.View.DestinationKind) {
		return false
	}
	for _, h := range t.helpers {
		if h.created && !h.ended && h != t.sender {
			return true
		}
	}
	return false
}

// decided ends the trace with the verdict of its hops, at the hop that
// decided it.
func (t *tracer) decided() *ending {
	v, at := outcome.Decide(t.pathHops())
	if at == nil {
		return &ending{verdict: v, reason: string(v)}
	}
	return &ending{verdict: v, reason: outcome.Describe(v, *at, t.plan.View.DestinationKind), decided: at}
}
