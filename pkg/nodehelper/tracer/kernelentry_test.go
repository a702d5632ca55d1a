package tracer

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// What the node's connection tracking shows of a probe from outside: a
// NodePort's DNAT (Antrea's proxyAll: to 169.254.0.252, the port kept, or
// a kube-proxy's to an endpoint and its port), and a packet the kernel
// routes or keeps unchanged.
func TestDestinationTranslated(t *testing.T) {
	orig := ctTuple{Proto: 6, Src: netip.MustParseAddr("10.89.0.1"), Dst: netip.MustParseAddr("10.89.0.11"), SrcPort: 61234, DstPort: 31241}
	back := func(src string, srcPort uint16) ctTuple {
		return ctTuple{Proto: 6, Src: netip.MustParseAddr(src), Dst: orig.Src, SrcPort: srcPort, DstPort: orig.SrcPort}
	}
	for name, tc := range map[string]struct {
		reply ctTuple
		want  bool
	}{
		"to Antrea's NodePort address, the port kept": {reply: back("169.254.0.252", 31241), want: true},
		"to an endpoint's port, the address kept":     {reply: back("10.89.0.11", 8080), want: true},
		"untranslated": {reply: back("10.89.0.11", 31241)},
	} {
		t.Run(name, func(t *testing.T) {
			e := ctEntry{Orig: orig, Reply: tc.reply}
			if got := e.DestinationTranslated(); got != tc.want {
				t.Errorf("DestinationTranslated = %v, want %v", got, tc.want)
			}
			if e.SourceTranslated() {
				t.Error("a DNAT is taken for an SNAT")
			}
		})
	}
	icmp := ctEntry{Orig: ctTuple{Proto: 1, Src: orig.Src, Dst: orig.Dst, ID: 7},
		Reply: ctTuple{Proto: 1, Src: orig.Dst, Dst: orig.Src, ID: 7}}
	if icmp.DestinationTranslated() {
		t.Error("an untranslated ICMP connection is taken for a DNAT")
	}
}

// The uplink bridge's hop to the node's stack is OVS's prediction:
// inferred, with the flow that took it there (NORMAL, on the lab's br-phy).
func TestUplinkIntoStack(t *testing.T) {
	b := &ovsdb.Bridge{Name: "br-phy", Ports: []ovsdb.Port{{Name: "br-phy", Ofport: 65534, Type: "internal"}, {Name: "eth0", Ofport: 1}}}
	up := &uplink{bridge: b, port: b.Ports[1], local: &b.Ports[0],
		hops: []ofproto.Hop{{Table: 0, Match: "", Priority: 0, Actions: []string{"NORMAL"}}}}
	o, hop := up.intoStack()
	want := report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded, Inferred: true,
		ComponentInfo: "br-phy, from its uplink eth0 to the node's own stack (br-phy)"}
	if d := cmp.Diff(want, o); d != "" {
		t.Errorf("observation (-want +got):\n%s", d)
	}
	if hop == nil || hop.Table != 0 || hop.Cookie != "0x0" || len(hop.Actions) != 1 || hop.Actions[0] != "NORMAL" {
		t.Errorf("hop %+v, want table 0's NORMAL flow", hop)
	}
	up.hops = nil
	if _, hop := up.intoStack(); hop != nil {
		t.Errorf("no trace, yet a hop: %+v", hop)
	}
}

// The kernel's hop names its DNAT where it made one, and nothing where
// its connection tracking could not be read.
func TestKernelNATExplain(t *testing.T) {
	n := kernelNAT{known: true, translated: true, to: netip.MustParseAddrPort("169.254.0.252:31241"),
		reply: "tcp 169.254.0.252:31241 -> 10.89.0.1:61234"}
	if got := n.explain(); !strings.Contains(got, "DNAT to 169.254.0.252:31241") || !strings.Contains(got, "the answer comes back as tcp 169.254.0.252:31241 -> 10.89.0.1:61234") {
		t.Errorf("explain = %q", got)
	}
	for _, n := range []kernelNAT{{}, {known: true}} {
		if got := n.explain(); got != "" {
			t.Errorf("%+v: explain = %q, want nothing", n, got)
		}
	}
}

// An answer that entered with the gateway's own address (Antrea SNATed
// the NodePort's probe to it) and leaves through the gateway un-SNATed to
// the outside's address goes on to that address: not delivered to the
// node. One that still carries the gateway's address is.
func TestFinalHopJudgedByTheAddressTheAnswerCarries(t *testing.T) {
	gw := netip.MustParseAddr("10.244.1.1")
	addrs := func(name string) []netip.Addr {
		if name == "gw0" {
			return []netip.Addr{gw}
		}
		return nil
	}
	tr := ofproto.Trace{Bridge: "br-int", DatapathActions: "6", Ports: ofproto.ParseDpifShow(readRecorded(t, "dpif-show-ovs.txt")),
		Hops: []ofproto.Hop{{Table: 0, Actions: []string{"output:3"}}}}
	for name, tc := range map[string]struct {
		carries string
		want    report.Action
	}{
		"un-SNATed to the outside": {carries: "10.89.0.1", want: report.ActionForwardedOutOfNetwork},
		"still to the gateway":     {carries: "10.244.1.1", want: report.ActionDelivered},
	} {
		t.Run(name, func(t *testing.T) {
			s := &session{br: ovsNode(), hostAddrs: addrs, c: Common{Logf: t.Logf}}
			w := &watcher{s: s, p: &path{t: tr}, dst: gw}
			w.final, w.verdict, w.last = s.goal(w.p, w.dst)
			if w.verdict.Action != report.ActionDelivered {
				t.Fatalf("entering with the gateway's address: %s, want Delivered", w.verdict.Action)
			}
			pkt, err := probe.Build(probe.Spec{Protocol: probe.TCP, SrcIP: netip.MustParseAddr("10.244.2.2"), DstIP: netip.MustParseAddr(tc.carries),
				SrcPort: 80, DstPort: 61234, TCPFlags: 0x12, TTL: 63, Tag: 9, SrcMAC: macOf(t, "02:00:00:00:00:01"), DstMAC: macOf(t, "02:00:00:00:00:02")})
			if err != nil {
				t.Fatal(err)
			}
			if got := w.hopVerdict(w.final, openflow.PacketIn{Packet: pkt}); got.Action != tc.want || w.verdict.Action != tc.want {
				t.Errorf("final hop %s (verdict kept %s), want %s", got.Action, w.verdict.Action, tc.want)
			}
		})
	}
}

func macOf(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := net.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The answer's hop into the node's stack is not the end of its way back
// where the uplink bridge it leaves by is watched: forwarded, and the
// watch goes on until its copy comes from that bridge. Without the watch,
// or for a hop that does not go into the node's stack, nothing changes.
func TestAnswerIntoTheStackIsNotItsEnd(t *testing.T) {
	br := ovsNode()
	gw := Verdict{Action: report.ActionForwardedOutOfNetwork, Port: br.ByOfport("gw0")}
	tunnel := Verdict{Action: report.ActionForwarded, Port: br.ByOfport("tun0")}
	for name, tc := range map[string]struct {
		stack       bool
		v           Verdict
		want        report.Action
		wantWaiting bool
	}{
		"into the node's stack, its exit watched":      {stack: true, v: gw, want: report.ActionForwarded, wantWaiting: true},
		"into the node's stack, no exit watched":       {v: gw, want: report.ActionForwardedOutOfNetwork},
		"into a tunnel, the exit watched all the same": {stack: true, v: tunnel, want: report.ActionForwarded},
	} {
		t.Run(name, func(t *testing.T) {
			s := &session{br: br}
			if tc.stack {
				s.stack = &stackExit{}
			}
			w := &watcher{s: s, p: &path{t: ofproto.Trace{Hops: []ofproto.Hop{{}}}, observed: []bool{true}}, last: 0}
			o := report.Observation{Action: tc.v.Action}
			w.intoStack(&o, tc.v)
			if o.Action != tc.want {
				t.Errorf("reported %s, want %s", o.Action, tc.want)
			}
			if got := s.stack != nil && s.stack.waiting; got != tc.wantWaiting {
				t.Errorf("waiting for the uplink bridge's copy: %v, want %v", got, tc.wantWaiting)
			}
			if w.watching() != tc.wantWaiting {
				t.Errorf("watching %v after the last hop reported, want %v", w.watching(), tc.wantWaiting)
			}
			if tc.wantWaiting {
				s.stack.seen = true
				if w.watching() {
					t.Error("still watching once the copy came")
				}
			}
		})
	}
}
