package helpermode

import (
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// A probe to an address outside the pod network whose source the pipeline
// translated (a gateway router's SNAT) waits for its answer where the
// sender follows an answer to the translated source (--reply-translated):
// the answer delivered back on the sender's node answers it, elsewhere it
// is lost. Without it,
// the probe's verdict ends the trace at once, with the warning that the
// answer is not followed.
func TestMachineRoundTripOutsideTranslated(t *testing.T) {
	snat := obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded, TranslatedSrcIP: "172.18.0.3"}, 40, "lr_out_snat", "f")
	out := obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwardedOutOfNetwork}, 20, "Output", "f")
	start := []event{begin(), created("receiver@n2"), line("receiver@n2", readyLine(report.RoleReceiver)), created("sender@n1"),
		line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", snat), line("sender@n1", out)}
	const notFollowed = "which the round trip does not follow yet"
	for _, tc := range []struct {
		name            string
		replyTranslated bool
		// answer are the events after the probe left the pod network;
		// the trace must not end before the last of them.
		answer []event
		// fate is the answer's, "" for a trace ended with the probe's
		// verdict alone.
		fate   outcome.ReplyFate
		warned bool
	}{
		{name: "answered", replyTranslated: true,
			answer: []event{line("sender@n1", caughtLine("SYN-ACK", false)), line("sender@n1", replyHome)}, fate: outcome.Answered},
		{name: "refused", replyTranslated: true,
			answer: []event{line("sender@n1", caughtLine("RST", true)), line("sender@n1", replyHome)}, fate: outcome.Refused},
		{name: "delivered on another node", replyTranslated: true,
			answer: []event{line("receiver@n2", caughtLine("SYN-ACK", false)), line("receiver@n2", replyHome)}, fate: outcome.Lost},
		{name: "no answer by the deadline", replyTranslated: true, answer: []event{evDone{deadline: true}}, fate: outcome.Unanswered},
		{name: "not followed without --reply-translated", warned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(machineConfig{trace: "tf", sender: "n1", receivers: []string{"n2"}, namespace: "ns", image: "img", timeout: 10 * time.Second, shared: true,
				roundTrip: true, dstKind: outcome.DestinationOutside, replyTranslated: tc.replyTranslated})
			events := append(append([]event(nil), start...), tc.answer...)
			warned := false
			for i, ev := range events {
				if m.ended != nil {
					t.Fatalf("ended before event %d of %d: %+v", i, len(events), *m.ended)
				}
				warned = stepsWarn(m, notFollowed, ev) || warned
			}
			if warned != tc.warned {
				t.Errorf("warned that the answer is not followed: %v, want %v", warned, tc.warned)
			}
			e := m.ended
			if e == nil || e.verdict != outcome.ForwardedOutOfNetwork {
				t.Fatalf("ended %+v, want ForwardedOutOfNetwork", e)
			}
			switch {
			case tc.fate == "" && e.reply != nil:
				t.Errorf("the answer's fate %+v, want the probe's verdict alone", *e.reply)
			case tc.fate != "" && (e.reply == nil || e.reply.Fate != tc.fate):
				t.Errorf("the answer's fate %+v, want %s", e.reply, tc.fate)
			}
		})
	}
}
