package helpermode

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// A round trip: every helper of the trace also follows the destination's
// answer on its node (the helper's --reply-tag), and marks those lines as
// the answer's (report.Line.Reply). Once the probe's own verdict is
// Delivered the trace does not end: it is held until the answer's fate is
// known, from the answer's hops (back at the source, or dropped, or gone
// elsewhere) or from every helper having stopped following it.

// replyState is what the machine knows of the answer.
type replyState struct {
	// held is the probe's ending while the answer is awaited.
	held *ending
	hops []outcome.TimedHop
	// answer is what the answer is, from the line of the node that caught
	// it first.
	answer *report.Answer
	// done holds the helpers that stopped following the answer (its
	// result or cleanup line, or the end of their report).
	done map[*helper]bool
	// unfollowed says why a helper did not follow the answer, where one
	// said so (the probe's source was translated on its node).
	unfollowed, unfollowedOn string
	// uncaught is the kinds of answer (report.Answer.Class) the helpers
	// could not catch, on the nodes uncaughtOn names: another trace from
	// the same source was catching them at the same time.
	uncaught, uncaughtOn []string
}

// onReplyLine folds one of the answer's lines.
func (m *machine) onReplyLine(h *helper, l report.Line, at time.Time) *ending {
	switch l.Type {
	case report.TypeObservation:
		if l.Observation == nil {
			return nil
		}
		if l.Answer != nil && m.reply.answer == nil {
			m.reply.answer = l.Answer
		}
		hop := hopFrom(h.node, report.RoleReply, l)
		m.reply.hops = append(m.reply.hops, outcome.TimedHop{Hop: hop, At: at})
		m.emit(outcome.Observed{At: outcome.At{Time: at}, Hop: hop})
		m.out = append(m.out, effRecord{hop: hop, at: at})
	case report.TypeResult, report.TypeCleanup:
		if l.Unfollowed != "" && m.reply.unfollowed == "" {
			m.reply.unfollowed, m.reply.unfollowedOn = l.Unfollowed, h.node
		}
		for _, c := range l.Uncaught {
			if !slices.Contains(m.reply.uncaught, c) {
				m.reply.uncaught = append(m.reply.uncaught, c)
			}
			if !slices.Contains(m.reply.uncaughtOn, h.node) {
				m.reply.uncaughtOn = append(m.reply.uncaughtOn, h.node)
			}
		}
		m.replyStopped(h)
	}
	return m.replyDecided(false)
}

func (m *machine) replyStopped(h *helper) {
	if m.reply.done == nil {
		m.reply.done = map[*helper]bool{}
	}
	m.reply.done[h] = true
}

// holdForAnswer is the ending the machine takes for end: a round trip's
// delivered probe waits for its answer (nil), once the answer's fate is
// known the two together. A failure ends the trace as it is; once the
// probe's verdict is held, another word on it changes nothing.
func (m *machine) holdForAnswer(end *ending) *ending {
	switch {
	case !m.roundTrip || end.replyDone:
		return end
	case end.err != nil || end.verdict == outcome.Failed:
		return end
	case m.reply.held != nil:
		return m.replyDecided(false)
	case end.verdict == outcome.ForwardedOutOfNetwork && outcome.ReachedDestination(end.verdict, m.dstKind):
		if th := m.translatedAt(); th != nil && !m.replyTranslated {
			at := &th.Hop
			m.emit(outcome.Warning{At: outcome.At{Time: th.At}, Node: at.Node, Message: fmt.Sprintf(
				"the probe's source was translated to %s on %s (table %s) on its way out: its answer comes back to that address, which the round trip does not follow yet; the verdict is the probe's alone", at.Observation.TranslatedSrcIP, at.Node, tableOf(*at))})
			return end
		}
	case end.verdict != outcome.Delivered:
		return end
	}
	m.reply.held = end
	return m.replyDecided(false)
}

// translatedAt is the probe's hop that translated its source (SNAT in the
// pipeline), if one did.
func (m *machine) translatedAt() *outcome.TimedHop {
	for i := range m.hops {
		if m.hops[i].Observation.TranslatedSrcIP != "" {
			return &m.hops[i]
		}
	}
	return nil
}

// replyDecided is the ending once the answer's fate is known, else nil;
// timedOut decides it from what was seen so far.
func (m *machine) replyDecided(timedOut bool) *ending {
	held := m.reply.held
	if held == nil {
		return nil
	}
	r := m.replyEnd(timedOut)
	if r == nil {
		return nil
	}
	e := *held
	e.replyDone = true
	if r.Fate == "" {
		// Not followed: the probe's verdict alone, and why.
		m.emit(outcome.Warning{At: outcome.At{Time: m.lastReplyAt()}, Node: m.reply.unfollowedOn, Message: "the answer was not followed: " + r.Reason})
		return &e
	}
	e.reply = r
	return &e
}

// lastReplyAt is the time of the answer's last hop, else of the probe's.
func (m *machine) lastReplyAt() time.Time {
	if n := len(m.reply.hops); n > 0 {
		return m.reply.hops[n-1].At
	}
	if n := len(m.hops); n > 0 {
		return m.hops[n-1].At
	}
	return time.Time{}
}

// replyEnd is the answer's fate: from the first of its hops that ends its
// way (back at the source, dropped, elsewhere), else, once no helper
// follows it any more (or timedOut), unanswered or lost after its last hop.
func (m *machine) replyEnd(timedOut bool) *outcome.ReplyEnd {
	kind, refused := "", false
	if a := m.reply.answer; a != nil {
		kind, refused = a.Kind, a.Refused
		if a.From != "" {
			kind += " from " + a.From
		}
	}
	for i := range m.reply.hops {
		h := m.reply.hops[i].Hop
		switch h.Observation.Action.Normalize() {
		case report.ActionDelivered:
			if h.Node != m.sender.node {
				return &outcome.ReplyEnd{Fate: outcome.Lost, Answer: kind, Decided: &h,
					Reason: fmt.Sprintf("the answer (%s) was delivered on %s, not back to the source on %s (%s)", kind, h.Node, m.sender.node, outcome.Describe(outcome.Delivered, h, m.dstKind))}
			}
			fate := outcome.Answered
			if refused {
				fate = outcome.Refused
			}
			return &outcome.ReplyEnd{Fate: fate, Answer: kind, Decided: &h,
				Reason: fmt.Sprintf("the answer (%s) came back: %s", kind, outcome.Describe(outcome.Delivered, h, m.dstKind))}
		case report.ActionDropped, report.ActionRejected:
			v, _ := outcome.OfAction(h.Observation.Action)
			return &outcome.ReplyEnd{Fate: outcome.Lost, Answer: kind, Decided: &h,
				Reason: fmt.Sprintf("the answer (%s) was %s", kind, outcome.Describe(v, h, m.dstKind))}
		case report.ActionForwardedOutOfNetwork:
			if m.outside && h.Node == m.sender.node {
				// The source is out there: the answer leaving through
				// the uplink the probe came in by is its way back.
				fate := outcome.Answered
				if refused {
					fate = outcome.Refused
				}
				return &outcome.ReplyEnd{Fate: fate, Answer: kind, Decided: &h,
					Reason: fmt.Sprintf("the answer (%s) went back out of %s towards the source, by %s (table %s)", kind, h.Node, h.Observation.ComponentInfo, tableOf(h))}
			}
			return &outcome.ReplyEnd{Fate: outcome.Lost, Answer: kind, Decided: &h,
				Reason: fmt.Sprintf("the answer (%s) left the pod network on %s (table %s) instead of coming back to the source", kind, h.Node, tableOf(h))}
		}
	}
	if m.reply.unfollowed != "" {
		return &outcome.ReplyEnd{Reason: m.reply.unfollowed + " (" + m.reply.unfollowedOn + ")"}
	}
	if !timedOut && !m.replyFollowedToTheEnd() {
		return nil
	}
	if r := m.uncaughtEnd(); r != nil {
		return r
	}
	if len(m.reply.hops) == 0 {
		return &outcome.ReplyEnd{Fate: outcome.Unanswered,
			Reason: fmt.Sprintf("no answer to the probe was seen within %s of its delivery", m.timeout)}
	}
	last := m.reply.hops[len(m.reply.hops)-1].Hop
	return &outcome.ReplyEnd{Fate: outcome.Lost, Answer: kind, Decided: &last,
		Reason: fmt.Sprintf("the answer (%s) was last seen %s on %s (table %s) and not after it within %s", kind, last.Observation.Action, last.Node, tableOf(last), m.timeout)}
}

// uncaughtEnd is, for an answer no hop decided, not followed where a
// helper could not catch answers of its kind (or of a kind it may have
// been, where none was seen): whether it came back is not known. Nil
// where the helpers caught every kind it can be.
func (m *machine) uncaughtEnd() *outcome.ReplyEnd {
	if len(m.reply.uncaught) == 0 {
		return nil
	}
	if a := m.reply.answer; a != nil && !slices.Contains(m.reply.uncaught, a.Class()) {
		return nil
	}
	return &outcome.ReplyEnd{Reason: fmt.Sprintf("answers of the kinds %s could not be caught on %s while another trace from the same source was catching them, so whether the answer came back is not known",
		strings.Join(m.reply.uncaught, ", "), strings.Join(m.reply.uncaughtOn, " and "))}
}

// replyFollowedToTheEnd reports whether no helper follows the answer any
// more.
func (m *machine) replyFollowedToTheEnd() bool {
	for _, h := range m.helpers {
		if h.created && !m.reply.done[h] {
			return false
		}
	}
	return true
}

func tableOf(h outcome.Hop) string {
	if h.TableName != "" {
		return h.TableName
	}
	return fmt.Sprint(h.TableID)
}
