package helpermode

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// A probe from outside the cluster enters on the sender's (the via
// node's) uplink, and its answer's way back ends leaving the pod network
// there, towards the source: answered (refused, for a RST), where the same
// hop on another node, or on any node when the source is in the cluster,
// is an answer lost.
func TestMachineRoundTripFromOutside(t *testing.T) {
	replyOut := replyLine(obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwardedOutOfNetwork,
		ComponentInfo: "patch-br-int-to-breth0"}, 20, "Output", "f"))
	start := []event{begin(), created("receiver@n2"), line("receiver@n2", readyLine(report.RoleReceiver)), created("sender@n1"),
		line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", tunnelledLine), line("sender@n1", resultLine("n1", report.RoleSender, 0)),
		line("receiver@n2", deliveredLine)}
	cases := []struct {
		name    string
		outside bool
		events  []event
		fate    outcome.ReplyFate
		answer  string
		reason  string
		// node is where the hop that decided the answer's fate is.
		node string
	}{{
		name: "out of the via node's uplink", outside: true,
		events: []event{line("receiver@n2", caughtLine("SYN-ACK", false)), line("receiver@n2", replyTunnelled), line("sender@n1", replyOut)},
		fate:   outcome.Answered, answer: "SYN-ACK from 10.0.2.5",
		reason: "went back out of n1 towards the source, by patch-br-int-to-breth0 (table Output)", node: "n1",
	}, {
		name: "a refusal out of the via node's uplink", outside: true,
		events: []event{line("receiver@n2", caughtLine("RST", true)), line("receiver@n2", replyTunnelled), line("sender@n1", replyOut)},
		fate:   outcome.Refused, answer: "RST from 10.0.2.5",
		reason: "went back out of n1 towards the source", node: "n1",
	}, {
		name: "out of another node", outside: true,
		events: []event{line("receiver@n2", caughtLine("SYN-ACK", false)), line("receiver@n2", replyOut)},
		fate:   outcome.Lost, answer: "SYN-ACK from 10.0.2.5",
		reason: "left the pod network on n2", node: "n2",
	}, {
		name:   "out of the sender's node, the source in the cluster",
		events: []event{line("receiver@n2", caughtLine("SYN-ACK", false)), line("receiver@n2", replyTunnelled), line("sender@n1", replyOut)},
		fate:   outcome.Lost, answer: "SYN-ACK from 10.0.2.5",
		reason: "left the pod network on n1", node: "n1",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMachine(machineConfig{trace: "tf", sender: "n1", receivers: []string{"n2"}, namespace: "ns", image: "img",
				timeout: 10 * time.Second, shared: true, roundTrip: true, dstKind: outcome.DestinationService, outside: c.outside})
			events := append(append([]event(nil), start...), c.events...)
			for i, ev := range events {
				m.step(ev)
				if m.ended != nil && i < len(events)-1 {
					t.Fatalf("ended at event %d of %d: %+v", i, len(events), *m.ended)
				}
			}
			if m.ended == nil || m.ended.reply == nil {
				t.Fatalf("ended %+v, want the probe's verdict and the answer's fate", m.ended)
			}
			e := m.ended
			if e.verdict != outcome.Delivered {
				t.Errorf("verdict %s, want Delivered", e.verdict)
			}
			if d := cmp.Diff([]string{string(c.fate), c.answer}, []string{string(e.reply.Fate), e.reply.Answer}); d != "" {
				t.Errorf("reply (-want +got):\n%s", d)
			}
			if !strings.Contains(e.reply.Reason, c.reason) {
				t.Errorf("reason %q lacks %q", e.reply.Reason, c.reason)
			}
			if e.reply.Decided == nil || e.reply.Decided.Node != c.node {
				t.Errorf("decided by %+v, want the hop on %s", e.reply.Decided, c.node)
			}
		})
	}
}

// With the Service's endpoint on the via node itself, the answer never
// leaves it: caught by the sender and out of its uplink, it is answered.
func TestMachineRoundTripFromOutsideOneNode(t *testing.T) {
	replyOut := replyLine(obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwardedOutOfNetwork}, 20, "Output", "f"))
	m := newMachine(machineConfig{trace: "tf", sender: "n1", namespace: "ns", image: "img", timeout: 10 * time.Second, shared: true,
		roundTrip: true, dstKind: outcome.DestinationService, outside: true})
	for _, ev := range []event{begin(), created("sender@n1"), line("sender@n1", readyLine(report.RoleSender)), line("sender@n1", deliveredLine),
		line("sender@n1", caughtLine("SYN-ACK", false)), line("sender@n1", replyOut)} {
		m.step(ev)
	}
	if m.ended == nil || m.ended.verdict != outcome.Delivered || m.ended.reply == nil || m.ended.reply.Fate != outcome.Answered {
		t.Fatalf("ended %+v, want Delivered and Answered", m.ended)
	}
}
