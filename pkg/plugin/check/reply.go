package check

import (
	"fmt"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// The ways a round trip's result can be decided in.
const (
	// Forward: the probe's way to the destination decided it.
	Forward = "forward"
	// Reply: the answer's way back decided it.
	Reply = "reply"
)

// Direction says which way decided the result of a round-trip case: Reply
// when its probe was delivered and the case expects the answer (delivered,
// which means answered, or refused), Forward when the probe's own verdict
// did. It is "" for a one-way case, and for a trace that did not end with a
// verdict (an error, a timeout), whose message stays as it is.
func (r Result) Direction(t Trace) string {
	switch {
	case !t.Case.RoundTrip || (r.Code != exitcode.OK && r.Code != exitcode.Verdict):
		return ""
	case r.Reply != nil && (t.Expect == "" || t.Expect == outcome.ExpectDelivered || t.Expect == outcome.ExpectRefused):
		return Reply
	}
	return Forward
}

// DecidingHop is the hop that decided the result, in its Direction: the
// answer's for Reply (nil when no answer was seen), else the probe's.
func (r Result) DecidingHop(t Trace) *outcome.Hop {
	if r.Direction(t) == Reply {
		return r.Reply.Decided
	}
	return r.Decided
}

// roundTripMessage is Message for a round-trip case. A pass says where the
// probe ended, then how the answer's way ended; a failure starts with the
// way that decided it: "forward: " and the probe's message, or "reply: ",
// the answer's fate against the expectation, and the answer's hop that
// decided it (node, table, flow).
func (r Result) roundTripMessage(t Trace) string {
	probe := r.probeMessage()
	switch dir := r.Direction(t); {
	case dir == "":
		return probe
	case r.Passed():
		if r.Reply != nil {
			probe += fmt.Sprintf("; reply %s: %s", r.Reply.Fate, r.Reply.Reason)
		}
		return probe
	case dir == Forward:
		return Forward + ": " + probe
	}
	msg := Reply + ": " + r.Reply.Reason
	if r.Err != nil {
		msg = Reply + ": " + r.Err.Error()
	}
	if h := r.Reply.Decided; h != nil {
		msg += " (at " + hopRef(*h) + ")"
	}
	return msg
}

// hopRef names a hop for a report: its node, table and flow, and whether
// it was only predicted.
func hopRef(h outcome.Hop) string {
	s := fmt.Sprintf("%s, table %d", h.Node, h.TableID)
	if h.TableName != "" {
		s = fmt.Sprintf("%s, table %s(%d)", h.Node, h.TableName, h.TableID)
	}
	if h.Flow != "" {
		s += ", flow " + h.Flow
	}
	if h.Inferred() {
		s += ", predicted by OVS's trace, not observed"
	}
	return s
}
