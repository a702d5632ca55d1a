//go:build integration

package tracer_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/tracer"
)

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

type oneNode struct {
	n                *ovstest.Node
	a, b, c, d       *ovstest.Pod
	svc              ovstest.Service
	ctx              context.Context
	cancelBackground context.CancelFunc
}

// newOneNode is a node with pods a, b (the trace's ends) and c, d (for
// background traffic), and a service 10.96.0.10:80 whose only endpoint is b.
func newOneNode(t *testing.T) *oneNode {
	t.Helper()
	return newOneNodeLB(t, "hash")
}

func newOneNodeLB(t *testing.T, selectionMethod string) *oneNode {
	t.Helper()
	requireOVS(t)
	n := ovstest.NewNode(t, 1)
	o := &oneNode{n: n}
	o.a = n.AddPod("default", "pod-a", 2)
	o.b = n.AddPod("default", "pod-b", 3)
	o.c = n.AddPod("default", "pod-c", 4)
	o.d = n.AddPod("default", "pod-d", 5)
	o.svc = ovstest.Service{GroupID: 1, VIP: "10.96.0.10", Port: 80, Endpoints: []string{o.b.IP.String()}, SelectionMethod: selectionMethod}
	n.Pipeline(o.svc)
	o.ctx, o.cancelBackground = context.WithCancel(context.Background())
	t.Cleanup(o.cancelBackground)
	return o
}

func (o *oneNode) spec(t *testing.T, tag uint8, dst netip.Addr, proto probe.Protocol, port uint16) tracer.TraceSpec {
	return tracer.TraceSpec{Common: common(o.n, tag, nil, t), SourcePod: o.a.Ref(), Destination: dst, Protocol: proto, DstPort: port, TCPFlags: 0x02}
}

func (o *oneNode) assertNoTraceFlows(t *testing.T, ready report.Line) {
	t.Helper()
	if flows := o.n.DumpFlows("cookie=" + ready.Ready.Cookie + "/0xffffffffffffff00"); strings.Count(flows, "cookie=") > 0 {
		t.Errorf("flows with the trace's cookie remain after the trace:\n%s", flows)
	}
}

func wantActions(t *testing.T, obs []report.Observation, want ...report.Action) {
	t.Helper()
	if len(obs) < len(want) {
		t.Fatalf("got %d observations, want at least %d: %+v", len(obs), len(want), obs)
	}
	got := obs[len(obs)-len(want):]
	for i := range want {
		if got[i].Action != want[i] {
			t.Fatalf("observation %d: action %s, want %s (all: %+v)", len(obs)-len(want)+i, got[i].Action, want[i], obs)
		}
	}
}

// Done-when 1, 7, 8: pod-a to pod-b TCP 80 through the named pipeline ends
// in Forwarding/Output Delivered, the probe really appears on pod-b's eth0,
// the hops agree with ovs-appctl ofproto/trace, and no flow is left.
func TestIntegrationIntraNodeTCPDelivered(t *testing.T) {
	o := newOneNode(t)
	if err := o.b.ServeTCP(o.ctx, 80); err != nil {
		t.Fatal(err)
	}
	// The pipeline carries real traffic.
	if err := o.a.DialTCP(o.b.IP.String()+":80", 3*time.Second); err != nil {
		t.Fatalf("pod-a cannot reach pod-b over the test pipeline: %v", err)
	}
	capture, err := o.b.StartCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer capture.Close()
	const tag = 11
	out, lines := traced(t, o.spec(t, tag, o.b.IP, probe.TCP, 80))
	res := result(t, lines)
	if out.ExitCode != tracer.ExitOK {
		t.Fatalf("exit code %d, want 0; %s", out.ExitCode, res.Explanation.Summary)
	}
	obs := observations(lines)
	last := obs[len(obs)-1]
	if last.Action != report.ActionDelivered || last.Component != report.ComponentForwarding || last.ComponentInfo != "Output" || last.Pod != "default/pod-b" {
		t.Fatalf("last observation %+v, want Forwarding/Output Delivered to default/pod-b", last)
	}
	if obs[0].Component != report.ComponentForwarding || obs[0].ComponentInfo != "Classifier" || obs[1].Component != report.ComponentSpoofGuard {
		t.Errorf("first observations %+v, want Classifier then SpoofGuard", obs[:2])
	}
	for _, l := range lines {
		if l.Type == report.TypeObservation && (l.Hop == nil || !l.Hop.Observed) {
			t.Errorf("observation without a real packet-in: %+v", l)
		}
	}
	frame, ok := capture.WaitFor(2*time.Second, func(f []byte) bool {
		s, err := probe.Decode(f)
		return err == nil && dscp.Value(s.Tag) == tag && s.DstIP == o.b.IP
	})
	if !ok {
		t.Fatal("the tagged probe never appeared on pod-b's eth0")
	}
	if s, _ := probe.Decode(frame); s.DstMAC.String() != o.b.MAC {
		t.Errorf("probe reached pod-b with dst MAC %s, want %s", s.DstMAC, o.b.MAC)
	}
	checkAgainstOVS(t, o.n, fmt.Sprintf("in_port=%d", o.a.Ofport), probeFor(t, o.a, o.b.IP, o.b.MAC, probe.TCP, 80, tag), res)
	o.assertNoTraceFlows(t, lines[0])
}

// Done-when 3, 7, 8: a NetworkPolicy-like drop in IngressDefaultRule.
func TestIntegrationNetworkPolicyDrop(t *testing.T) {
	o := newOneNode(t)
	o.n.DenyIngress(o.b)
	const tag = 12
	out, lines := traced(t, o.spec(t, tag, o.b.IP, probe.TCP, 80))
	res := result(t, lines)
	if out.ExitCode != tracer.ExitDropped {
		t.Fatalf("exit code %d, want 2; %s", out.ExitCode, res.Explanation.Summary)
	}
	obs := observations(lines)
	last := obs[len(obs)-1]
	if last.Action != report.ActionDropped || last.Component != report.ComponentNetworkPolicy || last.ComponentInfo != "IngressDefaultRule" {
		t.Fatalf("last observation %+v, want NetworkPolicy/IngressDefaultRule Dropped", last)
	}
	hop := lines[len(lines)-3].Hop // before the result and cleanup lines
	if hop == nil || hop.TableName != "IngressDefaultRule" || !strings.Contains(hop.Flow, fmt.Sprintf("reg1=0x%x", o.b.Ofport)) ||
		hop.Cookie != fmt.Sprintf("%#x", ovstest.CookiePolicy) || !hop.Observed {
		t.Fatalf("dropping hop %+v, want table IngressDefaultRule, the reg1 flow and its cookie, observed", hop)
	}
	if !strings.Contains(res.Explanation.Summary, "IngressDefaultRule") {
		t.Errorf("summary %q does not name the table", res.Explanation.Summary)
	}
	checkAgainstOVS(t, o.n, fmt.Sprintf("in_port=%d", o.a.Ofport), probeFor(t, o.a, o.b.IP, o.b.MAC, probe.TCP, 80, tag), res)
	o.assertNoTraceFlows(t, lines[0])

	// --brief: the same hops, observed, and the same verdict; the result
	// line without OVS's trace text and the hop list.
	spec := o.spec(t, tag, o.b.IP, probe.TCP, 80)
	spec.Brief = true
	bout, blines := traced(t, spec)
	bres := result(t, blines)
	if bout.ExitCode != out.ExitCode || bres.Explanation.Summary != res.Explanation.Summary || bres.Explanation.DatapathActions != res.Explanation.DatapathActions {
		t.Errorf("brief: exit %d, %q, %q; want %d, %q, %q", bout.ExitCode, bres.Explanation.Summary, bres.Explanation.DatapathActions,
			out.ExitCode, res.Explanation.Summary, res.Explanation.DatapathActions)
	}
	if bres.Explanation.Trace != "" || bres.Explanation.Hops != nil {
		t.Errorf("brief: the result carries the trace text (%d bytes) and %d hops", len(bres.Explanation.Trace), len(bres.Explanation.Hops))
	}
	if b, f := observations(blines), observations(lines); len(b) != len(f) || b[len(b)-1] != f[len(f)-1] {
		t.Errorf("brief: observations %+v, want %+v", b, f)
	}
	o.assertNoTraceFlows(t, blines[0])
}

// Done-when 4, 7: a destination nothing routes ends where the pipeline ends.
func TestIntegrationUnroutedDrop(t *testing.T) {
	o := newOneNode(t)
	const tag = 13
	dst := netip.MustParseAddr("10.99.0.1")
	out, lines := traced(t, o.spec(t, tag, dst, probe.TCP, 80))
	res := result(t, lines)
	if out.ExitCode != tracer.ExitDropped {
		t.Fatalf("exit code %d, want 2; %s", out.ExitCode, res.Explanation.Summary)
	}
	obs := observations(lines)
	last := obs[len(obs)-1]
	if last.Action != report.ActionDropped || last.ComponentInfo != "L3Forwarding" || last.Component != report.ComponentRouting {
		t.Fatalf("last observation %+v, want Routing/L3Forwarding Dropped", last)
	}
	if h := lines[len(lines)-3].Hop; h == nil || !h.NoMatch || !h.Observed || h.PipelineFlows == nil || *h.PipelineFlows == 0 {
		t.Fatalf("last hop %+v, want an observed table miss in a pipeline of some flows", h)
	}
	checkAgainstOVS(t, o.n, fmt.Sprintf("in_port=%d", o.a.Ofport), probeFor(t, o.a, dst, o.n.GatewayMAC, probe.TCP, 80, tag), res)
	o.assertNoTraceFlows(t, lines[0])
}

// Done-when 5: a ClusterIP-like service (select group + ct nat): an LB
// observation with the endpoint as translatedDstIP, then Delivered. With
// OVS's default selection method (dp_hash) ofproto/trace stops at the
// group; the helper pauses the real probe where it reenters a table and
// traces on from there with its real registers and conntrack state.
func TestIntegrationServiceLB(t *testing.T) {
	for name, method := range map[string]string{"hash": "hash", "dp_hash default": ""} {
		t.Run(name, func(t *testing.T) {
			o := newOneNodeLB(t, method)
			if err := o.b.ServeTCP(o.ctx, 80); err != nil {
				t.Fatal(err)
			}
			if err := o.a.DialTCP(o.svc.VIP+":80", 3*time.Second); err != nil {
				t.Fatalf("pod-a cannot reach the service over the test pipeline: %v", err)
			}
			const tag = 14
			out, lines := traced(t, o.spec(t, tag, netip.MustParseAddr(o.svc.VIP), probe.TCP, 80))
			res := result(t, lines)
			if out.ExitCode != tracer.ExitOK {
				t.Logf("trace:\n%s", res.Explanation.Trace)
				t.Fatalf("exit code %d, want 0; %s", out.ExitCode, res.Explanation.Summary)
			}
			obs := observations(lines)
			var lb *report.Observation
			for i := range obs {
				if obs[i].Component == report.ComponentLB && obs[i].TranslatedDstIP != "" {
					lb = &obs[i]
				}
			}
			if lb == nil || lb.TranslatedDstIP != o.b.IP.String() || lb.ComponentInfo != "ServiceLB" {
				t.Fatalf("no LB observation from ServiceLB with translatedDstIP %s: %+v", o.b.IP, obs)
			}
			sawLBHop := false
			for _, l := range lines {
				if l.Hop != nil && l.Hop.TableName == "ServiceLB" && l.Hop.Observed {
					sawLBHop = true
				}
			}
			if !sawLBHop {
				t.Errorf("the real probe did not report from ServiceLB")
			}
			wantActions(t, obs, report.ActionDelivered)
			if obs[len(obs)-1].Pod != "default/pod-b" {
				t.Errorf("delivered to %q, want default/pod-b", obs[len(obs)-1].Pod)
			}
			for _, l := range lines {
				if l.Type == report.TypeObservation && l.Hop != nil && !l.Hop.Observed {
					t.Errorf("hop %d not observed for real: %+v", l.Hop.Index, l.Hop)
				}
			}
			o.assertNoTraceFlows(t, lines[0])
		})
	}
}

// Done-when 6: IPv6 TCP and ICMPv6 echo, intra-node, delivered.
func TestIntegrationIPv6Delivered(t *testing.T) {
	o := newOneNode(t)
	for i, proto := range []probe.Protocol{probe.TCP, probe.ICMP} {
		t.Run(string(proto), func(t *testing.T) {
			tag := uint8(20 + i)
			capture, err := o.b.StartCapture()
			if err != nil {
				t.Fatal(err)
			}
			defer capture.Close()
			out, lines := traced(t, o.spec(t, tag, o.b.IPv6, proto, 80))
			res := result(t, lines)
			if out.ExitCode != tracer.ExitOK {
				t.Fatalf("exit code %d, want 0; %s", out.ExitCode, res.Explanation.Summary)
			}
			obs := observations(lines)
			if last := obs[len(obs)-1]; last.Action != report.ActionDelivered || last.Pod != "default/pod-b" {
				t.Fatalf("last observation %+v, want Delivered to default/pod-b", last)
			}
			if _, ok := capture.WaitFor(2*time.Second, func(f []byte) bool {
				s, err := probe.Decode(f)
				return err == nil && dscp.Value(s.Tag) == tag && s.DstIP == o.b.IPv6
			}); !ok {
				t.Fatal("the tagged IPv6 probe never appeared on pod-b's eth0")
			}
			port := uint16(80)
			if proto == probe.ICMP {
				port = 0
			}
			checkAgainstOVS(t, o.n, fmt.Sprintf("in_port=%d", o.a.Ofport), probeFor(t, o.a, o.b.IPv6, o.b.MAC, proto, port, tag), res)
			o.assertNoTraceFlows(t, lines[0])
		})
	}
}

type twoNodes struct {
	n1, n2 *ovstest.Node
	a, b   *ovstest.Pod
	ctx    context.Context
}

func newTwoNodes(t *testing.T) *twoNodes {
	t.Helper()
	requireOVS(t)
	n1, n2 := ovstest.NewNode(t, 1), ovstest.NewNode(t, 2)
	tn := &twoNodes{n1: n1, n2: n2}
	tn.a = n1.AddPod("default", "pod-a", 2)
	tn.b = n2.AddPod("default", "pod-b", 2)
	ovstest.Join(n1, n2)
	n1.Pipeline()
	n2.Pipeline()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tn.ctx = ctx
	return tn
}

// receive starts a receiver on n and returns its output once it is ready.
func receive(t *testing.T, n *ovstest.Node, tag uint8) (*syncBuffer, <-chan tracer.Outcome) {
	t.Helper()
	return receiveMarked(t, n, tag, 0)
}

// finished waits for a receiver started by receive to end and returns its
// outcome and report.
func finished(t *testing.T, buf *syncBuffer, done <-chan tracer.Outcome) (tracer.Outcome, []report.Line) {
	t.Helper()
	select {
	case out := <-done:
		return out, parseLines(t, buf.String())
	case <-time.After(10 * time.Second):
		t.Fatal("receiver did not finish")
	}
	return tracer.Outcome{}, nil
}

// receiveMarked is receive for probes with a trace's own mark (0: the
// tag's default).
func receiveMarked(t *testing.T, n *ovstest.Node, tag uint8, mark uint32) (*syncBuffer, <-chan tracer.Outcome) {
	t.Helper()
	return receiveWith(t, n, tag, func(c *tracer.Common) { c.Mark = mark })
}

// receiveWith is receive with set's changes to the receiver's Common.
func receiveWith(t *testing.T, n *ovstest.Node, tag uint8, set func(c *tracer.Common)) (*syncBuffer, <-chan tracer.Outcome) {
	t.Helper()
	var buf syncBuffer
	ready := make(chan struct{})
	c := common(n, tag, &readySignal{w: &buf, ready: ready}, t)
	set(&c)
	done := make(chan tracer.Outcome, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		out, err := tracer.Receive(context.Background(), c)
		if err != nil {
			t.Errorf("receive: %v", err)
		}
		done <- out
	}()
	// The ready line itself is the event: no clock decides how long a
	// receiver may take to install its flows. A receiver that ends without
	// one fails here; the long timeout only ends a wait that would hang.
	select {
	case <-ready:
	case <-ended:
		t.Fatalf("receiver ended without a ready line: %s", buf.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("receiver hung without a ready line: %s", buf.String())
	}
	return &buf, done
}

// Done-when 2, 7, 8: across a Geneve tunnel the sender reports Forwarded
// into the tunnel with tunnelDstIP, the receiver Received then Delivered,
// and the probe really reaches pod-b.
func TestIntegrationInterNodeGeneve(t *testing.T) {
	tn := newTwoNodes(t)
	if err := tn.b.ServeTCP(tn.ctx, 80); err != nil {
		t.Fatal(err)
	}
	if err := tn.a.DialTCP(tn.b.IP.String()+":80", 3*time.Second); err != nil {
		t.Fatalf("pod-a cannot reach pod-b across the tunnel: %v", err)
	}
	capture, err := tn.b.StartCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer capture.Close()
	const tag = 31
	rbuf, rdone := receive(t, tn.n2, tag)
	spec := tracer.TraceSpec{Common: common(tn.n1, tag, nil, t), SourcePod: tn.a.Ref(), Destination: tn.b.IP, Protocol: probe.TCP, DstPort: 80, TCPFlags: 0x02}
	out, lines := traced(t, spec)
	res := result(t, lines)
	if out.ExitCode != tracer.ExitOK {
		t.Fatalf("sender exit code %d: %s\n%s", out.ExitCode, res.Explanation.Summary, res.Explanation.Trace)
	}
	obs := observations(lines)
	last := obs[len(obs)-1]
	if last.Action != report.ActionForwarded || last.TunnelDstIP != tn.n2.UnderlayIP || last.Component != report.ComponentForwarding {
		t.Fatalf("sender's last observation %+v, want Forwarding Forwarded with tunnelDstIP %s", last, tn.n2.UnderlayIP)
	}
	rout, rlines := finished(t, rbuf, rdone)
	rres := result(t, rlines)
	if rout.ExitCode != tracer.ExitOK {
		t.Fatalf("receiver exit code %d: %s", rout.ExitCode, rres.Explanation.Summary)
	}
	robs := observations(rlines)
	if robs[0].Action != report.ActionReceived {
		t.Errorf("receiver's first observation %+v, want Received", robs[0])
	}
	if l := robs[len(robs)-1]; l.Action != report.ActionDelivered || l.Pod != "default/pod-b" {
		t.Fatalf("receiver's last observation %+v, want Delivered to default/pod-b", l)
	}
	if rres.Result.Role != report.RoleReceiver || len(rres.Result.Observations) != len(robs) {
		t.Errorf("receiver result %+v does not hold its %d observations", rres.Result, len(robs))
	}
	if _, ok := capture.WaitFor(2*time.Second, func(f []byte) bool {
		s, err := probe.Decode(f)
		return err == nil && dscp.Value(s.Tag) == tag && s.DstIP == tn.b.IP
	}); !ok {
		t.Fatal("the tagged probe never appeared on pod-b's eth0")
	}
	checkAgainstOVS(t, tn.n1, fmt.Sprintf("in_port=%d", tn.a.Ofport), probeFor(t, tn.a, tn.b.IP, tn.n1.GatewayMAC, probe.TCP, 80, tag), res)
	for _, n := range []*ovstest.Node{tn.n1, tn.n2} {
		if flows := n.DumpFlows("cookie=0x7466000000000000/0xffff000000000000"); strings.Count(flows, "cookie=") > 0 {
			t.Errorf("%s: trace flows remain:\n%s", n.Name, flows)
		}
	}
}

// Issue 15: the plugin gives a trace's helpers a random mark. A packet
// with the trace's tag but not its mark (here the tag's default mark, all a
// pod knowing the tag could forge) reaches the receiver first: it is let go
// and counted as ignored; the real probe, with the mark, is the one
// reported.
func TestIntegrationReceiverIgnoresPacketsWithoutTheMark(t *testing.T) {
	tn := newTwoNodes(t)
	const tag, mark = 27, 0x5eed1
	rbuf, rdone := receiveMarked(t, tn.n2, tag, mark)
	forged := tracer.TraceSpec{Common: common(tn.n1, tag, nil, t), SourcePod: tn.a.Ref(), Destination: tn.b.IP, Protocol: probe.UDP, DstPort: 53}
	if out, _ := traced(t, forged); out.ExitCode != tracer.ExitOK {
		t.Fatalf("the forged probe's own trace: exit %d", out.ExitCode)
	}
	real := tracer.TraceSpec{Common: common(tn.n1, tag, nil, t), SourcePod: tn.a.Ref(), Destination: tn.b.IP, Protocol: probe.TCP, DstPort: 80, TCPFlags: 0x02}
	real.Mark = mark
	if out, _ := traced(t, real); out.ExitCode != tracer.ExitOK {
		t.Fatalf("the real probe's trace: exit %d", out.ExitCode)
	}
	rout, rlines := finished(t, rbuf, rdone)
	rres := result(t, rlines)
	if rout.ExitCode != tracer.ExitOK || rout.IgnoredPackets != 1 {
		t.Fatalf("receiver: exit %d, %d packets ignored; want 0 and 1 (the forgery): %s", rout.ExitCode, rout.IgnoredPackets, rres.Explanation.Summary)
	}
	// The reported packet is the TCP probe, not the UDP forgery.
	if !strings.Contains(rres.Explanation.Trace, "tcp") || strings.Contains(rres.Explanation.Trace, "udp") {
		t.Fatalf("receiver traced another packet than the marked TCP probe:\n%s", rres.Explanation.Trace)
	}
}

// A CNI agent that reconciles the whole flow table (the lab's agent runs
// `ovs-ofctl --bundle replace-flows` on every cluster event, and the
// helper pods of a trace are such events) deletes the receiver's catch
// flows while it waits for the probe. The receiver must put them back and
// still report the probe: before, it waited in vain and the trace ended
// with "the probe went into the tunnel ... but no receiver reported it".
//
// A serve helper's traces hear of their removed flows through the helper's
// one connection per bridge (NodeCache; removals.go): the same holds
// there, with two receivers waiting on the node at once.
func TestIntegrationInterNodeAgentResync(t *testing.T) {
	t.Run("own connection", func(t *testing.T) { agentResync(t, nil) })
	t.Run("serve helper", func(t *testing.T) {
		cache := &tracer.NodeCache{}
		t.Cleanup(cache.Close)
		agentResync(t, cache)
	})
}

func agentResync(t *testing.T, cache *tracer.NodeCache) {
	tn := newTwoNodes(t)
	if err := tn.b.ServeTCP(tn.ctx, 80); err != nil {
		t.Fatal(err)
	}
	if err := tn.a.DialTCP(tn.b.IP.String()+":80", 3*time.Second); err != nil {
		t.Fatalf("pod-a cannot reach pod-b across the tunnel: %v", err)
	}
	const tag = 37
	withCache := func(c *tracer.Common) { c.Cache = cache }
	rbuf, rdone := receiveWith(t, tn.n2, tag, withCache)
	var otherReady report.Line
	var otherDone <-chan tracer.Outcome
	if cache != nil {
		// Another trace's receiver on the same node and cache, whose
		// catch flows the resyncs delete too, and which must put back its
		// own, not the first one's. No probe comes for it: it ends when
		// its timeout does.
		var obuf *syncBuffer
		obuf, otherDone = receiveWith(t, tn.n2, tag+1, withCache)
		otherReady = parseLines(t, obuf.String())[0]
	}
	ready := parseLines(t, rbuf.String())[0]
	catch := "cookie=" + ready.Ready.Cookie + "/0xffffffffffffff00"
	if got := strings.Count(tn.n2.DumpFlows(catch), "cookie="); got != ready.Ready.Flows {
		t.Fatalf("receiver ready with %d flows in the bridge, want %d", got, ready.Ready.Flows)
	}
	// Two resyncs, the second after the receiver has put its flows back.
resyncs:
	for i := 0; i < 2; i++ {
		tn.n2.Resync()
		// The receiver puts its flows back when it hears they were
		// removed; how soon depends on the machine, so the deadline only
		// ends a wait for flows that never come back.
		deadline := time.Now().Add(time.Minute)
		for strings.Count(tn.n2.DumpFlows(catch), "cookie=") < ready.Ready.Flows || !flowsBack(tn.n2, otherReady) {
			if time.Now().After(deadline) {
				// Go on: the trace shows what this costs.
				t.Errorf("resync %d deleted the receiver's catch flows and they did not come back", i+1)
				break resyncs
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	spec := tracer.TraceSpec{Common: common(tn.n1, tag, nil, t), SourcePod: tn.a.Ref(), Destination: tn.b.IP, Protocol: probe.TCP, DstPort: 80, TCPFlags: 0x02}
	out, lines := traced(t, spec)
	if out.ExitCode != tracer.ExitOK {
		t.Fatalf("sender exit code %d: %s", out.ExitCode, result(t, lines).Explanation.Summary)
	}
	rout, rlines := finished(t, rbuf, rdone)
	rres := result(t, rlines)
	if rout.ExitCode != tracer.ExitOK {
		t.Fatalf("receiver exit code %d: %s", rout.ExitCode, rres.Explanation.Summary)
	}
	robs := observations(rlines)
	if robs[0].Action != report.ActionReceived {
		t.Errorf("receiver's first observation %+v, want Received", robs[0])
	}
	if l := robs[len(robs)-1]; l.Action != report.ActionDelivered || l.Pod != "default/pod-b" {
		t.Fatalf("receiver's last observation %+v, want Delivered to default/pod-b", l)
	}
	if otherDone != nil {
		if out := <-otherDone; out.ExitCode != tracer.ExitTimeout {
			t.Errorf("the other receiver, which no probe came to: exit code %d, want %d", out.ExitCode, tracer.ExitTimeout)
		}
	}
	if flows := tn.n2.DumpFlows("cookie=0x7466000000000000/0xffff000000000000"); strings.Count(flows, "cookie=") > 0 {
		t.Errorf("trace flows remain after the trace:\n%s", flows)
	}
}

// flowsBack reports whether a receiver (ready, where it has one) has all
// its flows in n's bridge.
func flowsBack(n *ovstest.Node, ready report.Line) bool {
	if ready.Ready == nil {
		return true
	}
	return strings.Count(n.DumpFlows("cookie="+ready.Ready.Cookie+"/0xffffffffffffff00"), "cookie=") == ready.Ready.Flows
}

// Done-when 9: two traces with different tags at once on one bridge see
// only their own packet-ins, and a background ping between two other pods
// loses nothing meanwhile.
func TestIntegrationIsolation(t *testing.T) {
	o := newOneNode(t)
	if err := o.d.UDPEcho(o.ctx, 7); err != nil {
		t.Fatal(err)
	}
	pctx, stopPing := context.WithCancel(o.ctx)
	pinger, err := o.c.StartPinger(pctx, o.d.IP.String()+":7", 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	type res struct {
		out    tracer.Outcome
		report string
	}
	results := make(chan res, 2)
	tracesBegan := time.Now()
	for i, dir := range [][2]*ovstest.Pod{{o.a, o.b}, {o.b, o.a}} {
		tag := uint8(40 + i)
		spec := tracer.TraceSpec{Common: common(o.n, tag, nil, t), SourcePod: dir[0].Ref(), Destination: dir[1].IP, Protocol: probe.TCP, DstPort: 80, TCPFlags: 0x02}
		go func() {
			var buf syncBuffer
			spec.Out = report.NewWriter(&buf, nil)
			out, err := tracer.Trace(context.Background(), spec)
			if err != nil {
				t.Errorf("trace tag %d: %v", spec.Tag, err)
			}
			results <- res{out, buf.String()} // parsed by the test's goroutine: parseLines may t.Fatal
		}()
	}
	for range 2 {
		r := <-results
		lines := parseLines(t, r.report)
		if r.out.ExitCode != tracer.ExitOK {
			t.Errorf("a concurrent trace ended with exit code %d", r.out.ExitCode)
		}
		if r.out.ForeignPacketIns != 0 {
			t.Errorf("a trace saw %d packet-ins that were not its own", r.out.ForeignPacketIns)
		}
		if n := len(observations(lines)); n != len(result(t, lines).Result.Observations) || n < 5 {
			t.Errorf("a concurrent trace reported %d observations", n)
		}
	}
	tracesTook := time.Since(tracesBegan)
	time.Sleep(100 * time.Millisecond)
	stopPing()
	pinger.Wait()
	if pinger.Sent < 20 || pinger.Received != pinger.Sent {
		t.Fatalf("background ping: %d sent, %d answered; want all answered (the traces ran from 0 to %v; unanswered pings went at %v)",
			pinger.Sent, pinger.Received, tracesTook, pinger.Unanswered(tracesBegan))
	}
	t.Logf("background ping: %d sent, %d answered", pinger.Sent, pinger.Received)
}

// Issue 10, done-when 4b: a Service behind a dp_hash select group whose
// buckets only load the endpoint into registers and resubmit (Antrea's
// shape). OVS's trace stops at the group; the helper pauses the probe where
// it reenters a table and continues OVS's trace from that table, not from
// table 0 (where it would meet the group again). The trace ends Delivered
// at the endpoint the probe really reached, with translatedDstIP, and
// exactly one tagged probe reaches the endpoints, counted on their
// interfaces.
func TestIntegrationServiceRegisterBuckets(t *testing.T) {
	requireOVS(t)
	n := ovstest.NewNode(t, 1)
	a := n.AddPod("default", "pod-a", 2)
	b := n.AddPod("default", "pod-b", 3)
	c := n.AddPod("default", "pod-c", 4)
	svc := ovstest.Service{GroupID: 1, VIP: "10.96.0.10", Port: 80, Endpoints: []string{b.IP.String(), c.IP.String()}, RegisterBuckets: true}
	n.Pipeline(svc)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, p := range []*ovstest.Pod{b, c} {
		if err := p.ServeTCP(ctx, 80); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.DialTCP(svc.VIP+":80", 3*time.Second); err != nil {
		t.Fatalf("pod-a cannot reach the service over the test pipeline: %v", err)
	}
	const tag = 15
	captures := map[string]*ovstest.Capture{}
	for _, p := range []*ovstest.Pod{b, c} {
		cp, err := p.StartCapture()
		if err != nil {
			t.Fatal(err)
		}
		defer cp.Close()
		captures[p.IP.String()] = cp
	}
	start := time.Now()
	spec := tracer.TraceSpec{Common: common(n, tag, nil, t), SourcePod: a.Ref(), Destination: netip.MustParseAddr(svc.VIP),
		Protocol: probe.TCP, DstPort: 80, TCPFlags: 0x02}
	out, lines := traced(t, spec)
	t.Logf("time to verdict: %s", time.Since(start))
	res := result(t, lines)
	if out.ExitCode != tracer.ExitOK {
		t.Logf("trace:\n%s", res.Explanation.Trace)
		t.Fatalf("exit code %d, want 0; %s", out.ExitCode, res.Explanation.Summary)
	}
	obs := observations(lines)
	var translated string
	for _, o := range obs {
		if o.Component == report.ComponentLB && o.TranslatedDstIP != "" {
			translated = o.TranslatedDstIP
		}
	}
	last := obs[len(obs)-1]
	if last.Action != report.ActionDelivered || last.Inferred {
		t.Fatalf("last observation %+v, want Delivered, observed", last)
	}
	want := map[string]string{b.IP.String(): "default/pod-b", c.IP.String(): "default/pod-c"}
	if translated == "" || want[translated] != last.Pod {
		t.Fatalf("translatedDstIP %q and delivered to %q: they must name the same endpoint", translated, last.Pod)
	}
	// Classifier has one flow per pod, all with the same priority and
	// cookie: the hop names the one the real probe matched, pod-a's.
	for _, l := range lines {
		if l.Hop != nil && l.Hop.Table == ovstest.TableClassifier && l.Hop.Flow != fmt.Sprintf("in_port=%d", a.Ofport) {
			t.Errorf("Classifier hop's flow %q, want pod-a's in_port=%d", l.Hop.Flow, a.Ofport)
		}
	}
	// Count the tagged probes that reached either endpoint: exactly one,
	// at the endpoint translatedDstIP names.
	seen := map[string]int{}
	for ip, cp := range captures {
		for {
			if _, ok := cp.WaitFor(500*time.Millisecond, func(f []byte) bool {
				s, err := probe.Decode(f)
				return err == nil && dscp.Value(s.Tag) == tag
			}); !ok {
				break
			}
			seen[ip]++
		}
	}
	if seen[translated] != 1 || len(seen) != 1 {
		t.Errorf("tagged probes per endpoint %v, want exactly one at %s", seen, translated)
	}
	if flows := n.DumpFlows("cookie=0x7466000000000000/0xffff000000000000"); strings.Count(flows, "cookie=") > 0 {
		t.Errorf("trace flows remain:\n%s", flows)
	}
}

// A bridge its CNI has not programmed (ovs-vswitchd restarted, its agent
// not synced yet): the probe is dropped at the first table, by no flow,
// and the drop says the bridge held no flow but the trace's. A table miss
// in a programmed pipeline (TestIntegrationUnroutedDrop) counts its flows.
func TestIntegrationDropOnUnprogrammedBridge(t *testing.T) {
	requireOVS(t)
	n := ovstest.NewNode(t, 1)
	a := n.AddPod("default", "pod-a", 2)
	b := n.AddPod("default", "pod-b", 3)
	const tag = 21
	spec := tracer.TraceSpec{Common: common(n, tag, nil, t), SourcePod: a.Ref(), Destination: b.IP, Protocol: probe.TCP, DstPort: 80, TCPFlags: 0x02}
	out, lines := traced(t, spec)
	if out.ExitCode != tracer.ExitDropped {
		t.Fatalf("exit code %d, want 2 (dropped)", out.ExitCode)
	}
	var drop *report.Hop
	for _, l := range lines {
		if l.Type == report.TypeObservation && l.Observation.Action == report.ActionDropped {
			drop = l.Hop
		}
	}
	if drop == nil || !drop.NoMatch || drop.Table != 0 || drop.PipelineFlows == nil || *drop.PipelineFlows != 0 {
		t.Fatalf("drop hop %+v, want a table miss at table 0 with pipelineFlows 0", drop)
	}
}

// A serve helper's traces share the table names it read (NodeCache) for
// TableNamesMaxAge: a table renamed meanwhile keeps its old name in a
// trace within that time, and has its new one in the first trace after.
func TestIntegrationTableNamesCachedForAWhile(t *testing.T) {
	o := newOneNode(t)
	now := time.Now()
	cache := &tracer.NodeCache{Now: func() time.Time { return now }}
	guard := func(i int) string {
		t.Helper()
		spec := o.spec(t, 11, o.b.IP, probe.TCP, 80)
		spec.Cache = cache
		out, lines := traced(t, spec)
		if out.ExitCode != tracer.ExitOK {
			t.Fatalf("trace %d: exit code %d, want 0", i, out.ExitCode)
		}
		o.assertNoTraceFlows(t, lines[0])
		return observations(lines)[1].ComponentInfo
	}
	if g := guard(1); g != "SpoofGuard" {
		t.Fatalf("trace 1 names the spoof guard %q", g)
	}
	o.n.NameTables(map[int]string{ovstest.TableSpoofGuard: "Guard"})
	now = now.Add(tracer.TableNamesMaxAge - time.Millisecond)
	if g := guard(2); g != "SpoofGuard" {
		t.Errorf("trace 2, within the names' age: %q, want the cached SpoofGuard", g)
	}
	now = now.Add(time.Millisecond)
	if g := guard(3); g != "Guard" {
		t.Errorf("trace 3, after the names' age: %q, want Guard, read again", g)
	}
}

// A serve helper's traces read the node's ports through one OVSDB monitor
// (NodeCache), as fresh as a read of their own: a pod added after the
// monitor began is found by the very next trace, without waiting.
func TestIntegrationLiveOVSDBSeesANewPodAtOnce(t *testing.T) {
	o := newOneNode(t)
	cache := &tracer.NodeCache{}
	t.Cleanup(cache.Close)
	spec := o.spec(t, 11, o.b.IP, probe.TCP, 80)
	spec.Cache = cache
	if out, _ := traced(t, spec); out.ExitCode != tracer.ExitOK {
		t.Fatalf("first trace: exit code %d, want 0", out.ExitCode)
	}
	for i := range 5 {
		p := o.n.AddPod("default", fmt.Sprintf("late-%d", i), 20+i)
		spec := o.spec(t, 11, o.b.IP, probe.TCP, 80)
		spec.Cache, spec.SourcePod = cache, p.Ref()
		out, lines := traced(t, spec)
		if out.ExitCode == tracer.ExitSetup || lines[0].Type != report.TypeReady || lines[0].Ready.SourcePort != p.Port {
			t.Fatalf("trace from %s, added just before: exit %d, first line %+v; want its port %s found", p.Ref(), out.ExitCode, lines[0], p.Port)
		}
	}
}
