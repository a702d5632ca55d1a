package helpermode

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// onLine folds one line of a helper's report into the trace.
func (m *machine) onLine(ev evLine) *ending {
	h := m.helpers[ev.msg.pod]
	if h == nil {
		return nil
	}
	if ev.msg.line.Reply {
		return m.onReplyLine(h, ev.msg.line, lineTime(ev))
	}
	if ev.msg.eof != nil {
		m.replyStopped(h)
	}
	m.noteSettled(h, ev.msg)
	if h.ended {
		return m.replyDecided(false)
	}
	if msg := ev.msg; msg.problem != "" || msg.attachErr != nil || msg.eof != nil || msg.text != "" {
		return m.onStream(h, msg)
	}
	l := ev.msg.line
	at := lineTime(ev)
	switch l.Type {
	case report.TypeReady:
		return m.onReady(h, l, at)
	case report.TypeObservation:
		hop, _ := m.hopOf(h, l)
		if ev.hop != nil {
			hop = *ev.hop
		}
		m.hops = append(m.hops, outcome.TimedHop{Hop: hop, At: at})
		m.emit(outcome.Observed{At: outcome.At{Time: at}, Hop: hop})
		m.out = append(m.out, effRecord{hop: hop, at: at})
		if _, ends := outcome.OfAction(hop.Observation.Action); ends {
			m.pathEnd = &hop
			// A helper's lines arrive in order, so the sender's own end is
			// final at once; a receiver's waits for the sender's report to
			// be complete, because the two logs race to the plugin.
			return m.checkDone()
		}
	case report.TypeResult:
		h.result, h.ended = l.Result, true
		if l.ExitCode != nil && *l.ExitCode == exitIncomplete && l.Explanation != nil {
			h.unfinished = l.Explanation.Summary
		}
		return m.checkDone()
	case report.TypeError:
		return m.fail(h, l.Error.Message)
	}
	return nil
}

// lineTime is when a line was written, as the helper says, else when it
// arrived.
func lineTime(ev evLine) time.Time {
	if ev.msg.line.Time.IsZero() {
		return ev.now
	}
	return ev.msg.line.Time
}

// hopOf is the hop an observation line reports. A rule of an
// Antrea-native policy is known on the node by its conjunction id only: its
// policy is unknown, and says why. explain says whether the API may say
// more of a drop: which Kubernetes NetworkPolicy's isolation dropped it,
// or the name of a rule the helper knows by its index only (the loop asks
// the Explainer before the line reaches the machine).
func (m *machine) hopOf(h *helper, l report.Line) (hop outcome.Hop, explain bool) {
	hop = hopFrom(h.node, h.role, l)
	if o, named := outcome.NameAntreaRule(m.hops, hop); named {
		hop.Observation = o
		return hop, false
	}
	return hop, hop.Observation.Action == report.ActionDropped
}

// observation is the helper and hop of an observation line the machine
// would fold, for the loop to explain; ok is false for any other line.
func (m *machine) observation(msg lineMsg) (hop outcome.Hop, explain, ok bool) {
	h := m.helpers[msg.pod]
	if m.ended != nil || h == nil || h.ended || msg.problem != "" || msg.attachErr != nil || msg.eof != nil || msg.text != "" ||
		msg.line.Type != report.TypeObservation {
		return hop, false, false
	}
	hop, explain = m.hopOf(h, msg.line)
	return hop, explain, true
}

// onStream folds what a helper's stream says besides its report lines:
// a shared helper's problem, a failed attach, the end of its report, a
// line of noise.
func (m *machine) onStream(h *helper, msg lineMsg) *ending {
	switch {
	case msg.problem != "":
		return m.fail(h, "its node's shared helper "+msg.problem)
	case msg.attachErr != nil:
		if h.ready {
			return nil // the go got through: the stream just ended badly
		}
		return m.fail(h, fmt.Sprintf("cannot attach to it to start it and read its report: %v (the plugin needs create on pods/attach in namespace %s)", msg.attachErr, m.namespace))
	case msg.eof != nil:
		h.ended = true
		if h.result == nil && !errors.Is(msg.eof, io.EOF) && serverAway(msg.eof) {
			why := fmt.Sprintf("helper on node %s: its log stream through the API server broke (%v) before it reported (the API server restarted or is unreachable?): the plugin removes the trace's helper pods, tag claim and record once it answers again (within 30 s); run the trace again", h.node, msg.eof)
			return &ending{verdict: outcome.Failed, reason: why, apiAway: true, err: exitcode.Errorf(exitcode.Setup, "%s", why)}
		}
		if h.result == nil {
			why := "its output ended without a result"
			if !errors.Is(msg.eof, io.EOF) {
				why = msg.eof.Error()
			}
			if len(h.noise) > 0 {
				why += ": " + strings.Join(h.noise, " | ")
			}
			return m.fail(h, why+" (check the helper image and the node's OVS)")
		}
		return m.checkDone()
	case msg.text != "":
		h.addNoise(msg.text)
		return nil
	}
	return nil
}

// onReady folds a helper's ready line: the receivers' readiness lets the
// sender inject; the sender's own is the moment of injection.
func (m *machine) onReady(h *helper, l report.Line, at time.Time) *ending {
	h.ready, h.waiting, h.cookie = true, "", l.Ready.Cookie
	m.emit(outcome.HelperReady{At: outcome.At{Time: at}, Node: h.node, Role: h.role, Version: l.Ready.HelperVersion})
	if v := l.Ready.HelperVersion; m.version != "" && v != "" && v != m.version {
		m.emit(outcome.Warning{At: outcome.At{Time: at}, Node: h.node, Message: fmt.Sprintf(
			"helper %s differs from plugin %s: the report format may not match; use --helper-image with the plugin's version", v, m.version)})
	}
	if n := l.Ready.Naming; n != "" {
		m.emit(outcome.Warning{At: outcome.At{Time: at}, Node: h.node, Message: n})
	}
	if h == m.sender {
		// The sender injects as soon as its flows are in: its ready
		// line is the moment of injection, give or take microseconds.
		m.emit(outcome.Injected{At: outcome.At{Time: at}, Node: h.node})
		return nil
	}
	m.maybeStartSender()
	return nil
}

// checkDone ends the trace once no helper can still report its end: every
// helper has ended, or the sender has and its packet went into no tunnel
// and did not leave the pod network on its way to a pod or Service (a
// destination routed through the gateway arrives on its node's gateway,
// where that node's receiver catches it).
func (m *machine) checkDone() *ending {
	if m.pathEnd != nil && (m.pathEnd.Node == m.sender.node || m.sender.ended) && !m.mayArriveElsewhere() {
		return m.decided()
	}
	if !m.sender.ended {
		return nil
	}
	tunnelled := m.mayArriveElsewhere()
	for _, h := range m.hops {
		if h.Node == m.sender.node && h.Observation.TunnelDstIP != "" {
			tunnelled = true
		}
	}
	if tunnelled {
		for _, h := range m.helpers {
			if h.created && !h.ended {
				return nil
			}
		}
	}
	if v, _ := outcome.Decide(m.pathHops()); v != outcome.Incomplete {
		return m.decided()
	}
	reason := fmt.Sprintf("the probe was not seen on %s within %s", m.sender.node, m.timeout)
	if tunnelled {
		reason = fmt.Sprintf("the probe went into the tunnel on %s but no receiver reported it within %s: check the underlay between the nodes", m.sender.node, m.timeout)
	} else if len(m.hops) > 0 {
		last := m.hops[len(m.hops)-1]
		reason = fmt.Sprintf("the probe's last hop was %s %s on %s and nothing after it within %s", last.Observation.Component, last.Observation.Action, last.Node, m.timeout)
	}
	if m.sender.unfinished != "" {
		// The helper knows why it could not follow the probe (a packet
		// its pipeline's agent holds, a recirculation it could not follow).
		reason += "; the helper on " + m.sender.node + " says: " + m.sender.unfinished
	}
	return &ending{verdict: outcome.Incomplete, reason: reason}
}

// exitIncomplete is a helper's exit code for a trace it could not complete
// (tracer.ExitTimeout).
const exitIncomplete = 3

// pathHops are the hops in path order: the sender's first, then the
// receivers', each node's in the order it reported them. Arrival order is
// not path order: two helpers' logs race to the plugin, and a receiver's
// Delivered may come in before the sender's own last hop.
func (m *machine) pathHops() []outcome.TimedHop {
	hops := slices.Clone(m.hops)
	slices.SortStableFunc(hops, func(a, b outcome.TimedHop) int {
		return cmp.Compare(b2i(a.Node != m.sender.node), b2i(b.Node != m.sender.node))
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
func (m *machine) mayArriveElsewhere() bool {
	if m.pathEnd == nil || m.pathEnd.Node != m.sender.node || m.pathEnd.Observation.Action.Normalize() != report.ActionForwardedOutOfNetwork ||
		outcome.ReachedDestination(outcome.ForwardedOutOfNetwork, m.dstKind) {
		return false
	}
	for _, h := range m.helpers {
		if h.created && !h.ended && h != m.sender {
			return true
		}
	}
	return false
}

// decided ends the trace with the verdict of its hops, at the hop that
// decided it.
func (m *machine) decided() *ending {
	v, at := outcome.Decide(m.pathHops())
	if at == nil {
		return &ending{verdict: v, reason: string(v)}
	}
	return &ending{verdict: v, reason: outcome.Describe(v, *at, m.dstKind), decided: at}
}
