//go:build integration

package tracer_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/tracer"
)

// splitReply separates a report's answer lines from the probe's.
func splitReply(lines []report.Line) (probeLines, answer []report.Line) {
	for _, l := range lines {
		if l.Reply {
			answer = append(answer, l)
		} else {
			probeLines = append(probeLines, l)
		}
	}
	return probeLines, answer
}

// checkAnswer checks that an answer's lines caught kind (refused or not)
// and delivered it to pod.
func checkAnswer(t *testing.T, lines []report.Line, kind string, refused bool, pod string) {
	t.Helper()
	res := result(t, lines)
	obs := observations(lines)
	if len(obs) < 2 || res.ExitCode == nil || *res.ExitCode != tracer.ExitOK {
		t.Fatalf("answer: %d observations, result %+v (%s)", len(obs), res.Result, res.Explanation.Summary)
	}
	var caught *report.Answer
	for _, l := range lines {
		if l.Answer != nil {
			caught = l.Answer
		}
	}
	if obs[0].Action != report.ActionReceived || caught == nil || caught.Kind != kind || caught.Refused != refused {
		t.Errorf("answer caught as %+v at %+v, want %q refused=%v", caught, obs[0], kind, refused)
	}
	if l := obs[len(obs)-1]; l.Action != report.ActionDelivered || l.Pod != pod {
		t.Errorf("answer's last observation %+v, want Delivered to %s", l, pod)
	}
}

// Issue 26: on one node, the destination's own answer to the probe is
// caught where it enters the pipeline and followed back to the source pod:
// a SYN-ACK from a listening port, a RST from a closed one, an echo reply,
// a UDP answer and an ICMP port unreachable.
func TestIntegrationRoundTripOneNode(t *testing.T) {
	o := newOneNode(t)
	if err := o.b.ServeTCP(o.ctx, 80); err != nil {
		t.Fatal(err)
	}
	if err := o.b.UDPEcho(o.ctx, 5353); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		proto   probe.Protocol
		port    uint16
		kind    string
		refused bool
	}{
		{"tcp open", probe.TCP, 80, "SYN-ACK", false},
		{"tcp closed", probe.TCP, 81, "RST", true},
		{"icmp", probe.ICMP, 0, "echo reply", false},
		{"udp echo", probe.UDP, 5353, "UDP", false},
		{"udp closed", probe.UDP, 5354, "ICMP DestinationUnreachable(Port)", true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := o.spec(t, uint8(20+i), o.b.IP, c.proto, c.port)
			spec.ReplyTag = uint8(40 + i)
			out, lines := traced(t, spec)
			fwd, answer := splitReply(lines)
			res := result(t, fwd)
			if out.ExitCode != tracer.ExitOK {
				t.Fatalf("probe: exit %d: %s", out.ExitCode, res.Explanation.Summary)
			}
			checkAnswer(t, answer, c.kind, c.refused, "default/pod-a")
			o.assertNoTraceFlows(t, answer[0])
			o.assertNoTraceFlows(t, fwd[0])
		})
	}
}

// Issue 26: across the Geneve tunnel, the answer leaves the destination's
// node into the tunnel and the source's node delivers it to the source.
func TestIntegrationRoundTripAcrossNodes(t *testing.T) {
	tn := newTwoNodes(t)
	if err := tn.b.ServeTCP(tn.ctx, 80); err != nil {
		t.Fatal(err)
	}
	const tag, replyTag = 33, 34
	rbuf, rdone := receiveWith(t, tn.n2, tag, func(c *tracer.Common) { c.ReplyTag = replyTag })
	spec := tracer.TraceSpec{Common: common(tn.n1, tag, nil, t), SourcePod: tn.a.Ref(), Destination: tn.b.IP, Protocol: probe.TCP, DstPort: 80, TCPFlags: 0x02}
	spec.ReplyTag = replyTag
	_, slines := traced(t, spec)
	_, rlines := finished(t, rbuf, rdone)
	sfwd, sanswer := splitReply(slines)
	rfwd, ranswer := splitReply(rlines)
	result(t, sfwd)
	result(t, rfwd)
	checkAnswer(t, sanswer, "SYN-ACK", false, "default/pod-a")
	robs := observations(ranswer)
	var caught *report.Answer
	for _, l := range ranswer {
		if l.Answer != nil {
			caught = l.Answer
		}
	}
	if caught == nil || caught.Kind != "SYN-ACK" {
		t.Errorf("pod-b's node caught %+v, want a SYN-ACK", caught)
	}
	if l := robs[len(robs)-1]; l.Action != report.ActionForwarded || l.TunnelDstIP != tn.n1.UnderlayIP {
		t.Errorf("answer's last observation on pod-b's node %+v, want Forwarded into the tunnel to %s", l, tn.n1.UnderlayIP)
	}
}

// The same round trip to the Service twice from one source port: the
// first's connection is still tracked (closing) when the second's DNAT
// commits, so conntrack gives the second probe another source port, as
// it would a real client's. Found in the lab (Antrea, a NodePort from
// outside): the helper took the moved probe for another packet and the
// trace ended incomplete at the DNAT. The second is followed to its
// delivery, says the port moved, and its answer is caught at the moved
// port and followed back.
func TestIntegrationRoundTripWhosePortConntrackMoved(t *testing.T) {
	o := newOneNode(t)
	if err := o.b.ServeTCP(o.ctx, 80); err != nil {
		t.Fatal(err)
	}
	const port = 62555
	moved := fmt.Sprintf("conntrack moved the probe's source port from %d to ", port)
	for i := range 2 {
		spec := o.spec(t, uint8(20+i), netip.MustParseAddr(o.svc.VIP), probe.TCP, 80)
		spec.SrcPort, spec.ReplyTag = port, uint8(40+i)
		out, lines := traced(t, spec)
		fwd, answer := splitReply(lines)
		res := result(t, fwd)
		if out.ExitCode != tracer.ExitOK {
			t.Fatalf("trace %d: exit %d: %s", i, out.ExitCode, res.Explanation.Summary)
		}
		obs := observations(fwd)
		said := slices.ContainsFunc(obs, func(o report.Observation) bool { return strings.Contains(o.ComponentInfo, moved) })
		if said != (i == 1) {
			t.Errorf("trace %d: says %q: %v, want %v (observations %+v)", i, moved, said, i == 1, obs)
		}
		wantActions(t, obs, report.ActionDelivered)
		checkAnswer(t, answer, "SYN-ACK", false, "default/pod-a")
		o.assertNoTraceFlows(t, answer[0])
		o.assertNoTraceFlows(t, fwd[0])
	}
}
