package helpermode

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

func replyLine(l report.Line) report.Line { l.Reply = true; return l }

func caughtLine(kind string, refused bool) report.Line {
	l := replyLine(obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionReceived}, 0, "Classifier", "f"))
	l.Answer = &report.Answer{Kind: kind, Refused: refused, From: "10.0.2.5"}
	return l
}

var (
	replyTunnelled = replyLine(tunnelledLine)
	replyHome      = replyLine(obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionDelivered, Pod: "default/pod-a"}, 20, "Output", "f"))
	replyDropped   = replyLine(obsLine(report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped}, 60, "EgressRule", "f"))
)

// A round trip holds the probe's Delivered until the answer's fate is
// known, and ends with both.
func TestMachineRoundTrip(t *testing.T) {
	cfg := machineConfig{trace: "tf", sender: "n1", receivers: []string{"n2"}, namespace: "ns", image: "img", timeout: 10 * time.Second, shared: true, roundTrip: true}
	start := []event{begin(), created("receiver@n2"), line("receiver@n2", readyLine(report.RoleReceiver)), created("sender@n1"),
		line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", tunnelledLine), line("sender@n1", resultLine("n1", report.RoleSender, 0))}
	cases := []struct {
		name   string
		events []event
		// The trace must end at the last event, not before.
		fate, answer string
	}{{
		name: "answered across the tunnel",
		events: []event{line("receiver@n2", deliveredLine), line("receiver@n2", caughtLine("SYN-ACK", false)),
			line("receiver@n2", replyTunnelled), line("sender@n1", caughtLine("SYN-ACK", false)), line("sender@n1", replyHome)},
		fate: "Answered", answer: "SYN-ACK from 10.0.2.5",
	}, {
		name:   "refused",
		events: []event{line("receiver@n2", deliveredLine), line("receiver@n2", caughtLine("RST", true)), line("receiver@n2", replyTunnelled), line("sender@n1", replyHome)},
		fate:   "Refused", answer: "RST from 10.0.2.5",
	}, {
		name:   "lost on the way back",
		events: []event{line("receiver@n2", deliveredLine), line("receiver@n2", caughtLine("SYN-ACK", false)), line("receiver@n2", replyDropped)},
		fate:   "Lost", answer: "SYN-ACK from 10.0.2.5",
	}, {
		name: "unanswered once no helper follows it",
		events: []event{line("receiver@n2", deliveredLine), line("receiver@n2", resultLine("n2", report.RoleReceiver, 0)),
			line("receiver@n2", replyLine(resultLine("n2", report.RoleReceiver, 3))), line("sender@n1", replyLine(resultLine("n1", report.RoleReceiver, 3)))},
		fate: "Unanswered",
	}, {
		name: "into the tunnel and not after it",
		events: []event{line("receiver@n2", deliveredLine), line("receiver@n2", caughtLine("SYN-ACK", false)), line("receiver@n2", replyTunnelled),
			line("receiver@n2", replyLine(resultLine("n2", report.RoleReceiver, 0))), line("sender@n1", replyLine(resultLine("n1", report.RoleReceiver, 3)))},
		fate: "Lost", answer: "SYN-ACK from 10.0.2.5",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMachine(cfg)
			events := append(append([]event(nil), start...), c.events...)
			for i, ev := range events {
				m.step(ev)
				if m.ended != nil && i < len(events)-1 {
					t.Fatalf("ended at event %d of %d: %+v", i, len(events), *m.ended)
				}
			}
			if m.ended == nil {
				t.Fatal("not ended")
			}
			e := m.ended
			if e.verdict != outcome.Delivered || e.reply == nil {
				t.Fatalf("ended %s with reply %+v, want Delivered with a reply", e.verdict, e.reply)
			}
			if diff := cmp.Diff([]string{c.fate, c.answer}, []string{string(e.reply.Fate), e.reply.Answer}); diff != "" {
				t.Errorf("reply (-want +got):\n%s\n%s", diff, e.reply.Reason)
			}
		})
	}
}

// Without the answer's end, the trace's deadline decides from what was
// seen; a dropped probe ends at once, with no answer to wait for.
func TestMachineRoundTripEnds(t *testing.T) {
	cfg := machineConfig{trace: "tf", sender: "n1", namespace: "ns", image: "img", timeout: 10 * time.Second, shared: true, roundTrip: true}
	m := newMachine(cfg)
	for _, ev := range []event{begin(), created("sender@n1"), line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", deliveredLine)} {
		m.step(ev)
	}
	if m.ended != nil {
		t.Fatalf("a delivered probe's trace ended before its answer: %+v", *m.ended)
	}
	m.step(evDone{deadline: true})
	if m.ended == nil || m.ended.reply == nil || m.ended.reply.Fate != outcome.Unanswered {
		t.Fatalf("deadline: ended %+v, want Delivered and Unanswered", m.ended)
	}
	m = newMachine(cfg)
	dropped := obsLine(report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped}, 60, "IngressRule", "f")
	for _, ev := range []event{begin(), created("sender@n1"), line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", dropped)} {
		m.step(ev)
	}
	if m.ended == nil || m.ended.verdict != outcome.Dropped || m.ended.reply != nil {
		t.Fatalf("dropped probe: ended %+v, want Dropped at once without a reply", m.ended)
	}
}

// A probe to an address outside the pod network that left it untranslated
// (a node's kernel masquerades it) waits for its answer, which the node
// un-SNATs before it enters the bridge; one whose source the pipeline
// translated ends with the probe's verdict and a warning, since its
// answer comes back to an address the round trip does not follow.
func TestMachineRoundTripOutside(t *testing.T) {
	cfg := machineConfig{trace: "tf", sender: "n1", namespace: "ns", image: "img", timeout: 10 * time.Second, shared: true, roundTrip: true,
		dstKind: outcome.DestinationOutside}
	out := obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwardedOutOfNetwork}, 20, "Output", "f")
	m := newMachine(cfg)
	for _, ev := range []event{begin(), created("sender@n1"), line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", out)} {
		m.step(ev)
	}
	if m.ended != nil {
		t.Fatalf("an untranslated probe out of the pod network ended before its answer: %+v", *m.ended)
	}
	for _, ev := range []event{line("sender@n1", caughtLine("echo reply", false)), line("sender@n1", replyHome)} {
		m.step(ev)
	}
	if m.ended == nil || m.ended.verdict != outcome.ForwardedOutOfNetwork || m.ended.reply == nil || m.ended.reply.Fate != outcome.Answered {
		t.Fatalf("ended %+v, want ForwardedOutOfNetwork and Answered", m.ended)
	}
	m = newMachine(cfg)
	snat := obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded, TranslatedSrcIP: "10.89.0.11"}, 40, "lr_out_snat", "f")
	warned := stepsWarn(m, "10.89.0.11", begin(), created("sender@n1"), line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", snat), line("sender@n1", out))
	if m.ended == nil || m.ended.reply != nil || !warned {
		t.Fatalf("SNATed in the pipeline: ended %+v, warned %v; want the probe's verdict at once, with a warning", m.ended, warned)
	}
}

// A helper that did not follow the answer (the probe's source was
// translated on its node, as a hairpin's is) ends the round trip with the
// probe's verdict and a warning that says why, not with Unanswered.
func TestMachineRoundTripUnfollowed(t *testing.T) {
	cfg := machineConfig{trace: "tf", sender: "n1", namespace: "ns", image: "img", timeout: 10 * time.Second, shared: true, roundTrip: true}
	m := newMachine(cfg)
	unfollowed := replyLine(resultLine("n1", report.RoleReceiver, 3))
	unfollowed.Unfollowed = "the probe's source was translated"
	warned := stepsWarn(m, "not followed: the probe's source was translated",
		begin(), created("sender@n1"), line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", deliveredLine), line("sender@n1", unfollowed))
	if m.ended == nil || m.ended.verdict != outcome.Delivered || m.ended.reply != nil || !warned {
		t.Fatalf("ended %+v, warned %v: want Delivered without an answer's fate, and a warning", m.ended, warned)
	}
}

// stepsWarn steps m through events and reports whether it showed a warning
// that says text.
func stepsWarn(m *machine, text string, events ...event) bool {
	warned := false
	for _, ev := range events {
		for _, e := range m.step(ev) {
			if em, ok := e.(effEmit); ok {
				if w, ok := em.u.(outcome.Warning); ok && strings.Contains(w.Message, text) {
					warned = true
				}
			}
		}
	}
	return warned
}

// A helper that could not catch a kind of answer (another trace from the
// same source was catching such answers: the helpers' catch keys) makes an
// answer of that kind, or of no kind seen, not followed instead of
// unanswered or lost; an answer of another kind keeps its fate.
func TestMachineRoundTripUncaught(t *testing.T) {
	cfg := machineConfig{trace: "tf", sender: "n1", receivers: []string{"n2"}, namespace: "ns", image: "img", timeout: 10 * time.Second, shared: true, roundTrip: true}
	uncaught := replyLine(resultLine("n1", report.RoleReceiver, 3))
	uncaught.Uncaught = []string{"ICMP error"}
	start := []event{begin(), created("receiver@n2"), line("receiver@n2", readyLine(report.RoleReceiver)), created("sender@n1"),
		line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", tunnelledLine), line("sender@n1", resultLine("n1", report.RoleSender, 0)),
		line("receiver@n2", deliveredLine)}
	for name, c := range map[string]struct {
		caught []event
		fate   outcome.ReplyFate
	}{
		"none seen":                 {nil, ""},
		"an ICMP error seen":        {[]event{line("receiver@n2", caughtLine("ICMP DestinationUnreachable(Port)", true)), line("receiver@n2", replyTunnelled)}, ""},
		"a SYN-ACK into the tunnel": {[]event{line("receiver@n2", caughtLine("SYN-ACK", false)), line("receiver@n2", replyTunnelled)}, outcome.Lost},
	} {
		t.Run(name, func(t *testing.T) {
			m := newMachine(cfg)
			events := append(append(append([]event(nil), start...), c.caught...),
				line("receiver@n2", replyLine(resultLine("n2", report.RoleReceiver, 3))), line("sender@n1", uncaught))
			warned := stepsWarn(m, "could not be caught on n1", events...)
			if m.ended == nil || m.ended.verdict != outcome.Delivered {
				t.Fatalf("ended %+v, want Delivered", m.ended)
			}
			switch {
			case c.fate == "" && (m.ended.reply != nil || !warned):
				t.Errorf("reply %+v, warned %v: want not followed, with a warning", m.ended.reply, warned)
			case c.fate != "" && (m.ended.reply == nil || m.ended.reply.Fate != c.fate):
				t.Errorf("reply %+v, want %s", m.ended.reply, c.fate)
			}
		})
	}
}
