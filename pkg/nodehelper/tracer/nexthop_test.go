package tracer

import (
	"net"
	"net/netip"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
)

func TestNextHop(t *testing.T) {
	ovnk := &ovsdb.Port{IfaceExternalIDs: map[string]string{"iface-id": "demo_a", "ip_addresses": "10.244.1.5/24"}}
	antrea := &ovsdb.Port{PortExternalIDs: map[string]string{"pod-namespace": "demo", "pod-name": "a", "ip": "10.244.1.5"}}
	src := netip.MustParseAddr("10.244.1.5")
	for name, tc := range map[string]struct {
		port *ovsdb.Port
		dst  string
		want string
		ok   bool
	}{
		"on-link destination: the pod asks for it":      {ovnk, "10.244.1.7", "10.244.1.7", true},
		"routed destination: the pod asks its gateway":  {ovnk, "10.244.2.6", "10.244.1.1", true},
		"a Service address is routed too":               {ovnk, "10.96.0.10", "10.244.1.1", true},
		"no recorded subnet: the pipeline is not asked": {antrea, "10.244.2.6", "", false},
	} {
		got, ok := nextHop(tc.port, src, netip.MustParseAddr(tc.dst))
		if ok != tc.ok || (ok && got.String() != tc.want) {
			t.Errorf("%s: nextHop = %v %v, want %s %v", name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestARPFlow(t *testing.T) {
	mac, _ := net.ParseMAC("0a:58:0a:f4:01:05")
	want := "in_port=4,arp,dl_src=0a:58:0a:f4:01:05,dl_dst=ff:ff:ff:ff:ff:ff,arp_op=1,arp_spa=10.244.1.5,arp_tpa=10.244.1.1,arp_sha=0a:58:0a:f4:01:05,arp_tha=00:00:00:00:00:00"
	if got := arpFlow(4, mac, netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("10.244.1.1")); got != want {
		t.Errorf("arpFlow = %q, want %q", got, want)
	}
}

func TestTunnelFlow(t *testing.T) {
	md := openflow.Metadata{HasTunID: true, TunID: 3, TunSrc: netip.MustParseAddr("172.31.88.1"), TunDst: netip.MustParseAddr("172.31.88.2"),
		TunMetadata: map[int][]byte{2: {0xaa}, 0: {0, 1, 0, 2}}, TunFlags: 1, HasTunFlags: true}
	want := ",tun_id=0x3,tun_src=172.31.88.1,tun_dst=172.31.88.2,tun_metadata0=0x00010002,tun_metadata2=0xaa,tun_flags=+oam"
	if got := tunnelFlow(md); got != want {
		t.Errorf("tunnelFlow = %q, want %q", got, want)
	}
	if got := tunnelFlow(openflow.Metadata{}); got != "" {
		t.Errorf("no tunnel: %q", got)
	}
}

// OVN's flows at priority 65535 cannot be outranked: their hops are not
// watched (so they are reported as inferred), and no copy is installed at
// the same priority.
func TestBuildPlanPriority65535IsNotWatched(t *testing.T) {
	tr := ofproto.Trace{Hops: []ofproto.Hop{
		{Table: 8, Priority: 100, Cookie: 0x1},
		{Table: 16, Priority: 65535, Cookie: 0x2},
		{Table: 17, Priority: 0, Cookie: 0x3},
	}}
	flows := map[uint8][]openflow.FlowDesc{
		8:  {{TableID: 8, Priority: 100, Cookie: 0x1, Match: openflow.InPortField(1)}},
		16: {{TableID: 16, Priority: 65535, Cookie: 0x2, Match: openflow.EthTypeField(0x800)}},
		17: {{TableID: 17, Priority: 0, Cookie: 0x3}},
	}
	p, err := BuildPlan(PlanInput{Trace: tr, Flows: flows, Tag: 5, EthType: 0x800, Cookie: TraceCookie(5, 1), ControllerID: 9, HardTimeout: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.FlowMods) != 2 {
		t.Errorf("%d flow mods, want 2 (none for the priority-65535 flow)", len(p.FlowMods))
	}
	if want := []bool{true, false, true}; p.Watched[0] != want[0] || p.Watched[1] != want[1] || p.Watched[2] != want[2] {
		t.Errorf("watched %v, want %v", p.Watched, want)
	}
	if p.Skipped[1] == "" {
		t.Error("the priority-65535 hop does not say why it is not watched")
	}
}

// Recorded on OVN (record-ovn.sh): the logical switch answers pod A's ARP
// for its gateway with the router port's MAC, and for pod C with pod C's.
// A pipeline that passes an ARP on answers nothing.
func TestARPAnswerOnRecordedTraces(t *testing.T) {
	for file, want := range map[string]string{
		"ovn-arp-gateway.txt": "0a:58:ac:1f:0a:01",
		"ovn-arp-onlink.txt":  "0a:58:ac:1f:0a:07",
		"ovs-gateway.txt":     "",
		"ovs-delivered.txt":   "",
	} {
		tr := ofproto.Parse(readRecorded(t, file), "br-int")
		got := ARPAnswer(tr)
		if (want == "" && got != nil) || (want != "" && (got == nil || got.String() != want)) {
			t.Errorf("%s: ARPAnswer = %v, want %q (datapath actions %q)", file, got, want, tr.DatapathActions)
		}
	}
	// A reply that the pipeline does not output is no answer.
	if got := ARPAnswer(ofproto.Trace{DatapathActions: "set(arp(op=2,sha=0a:58:ac:1f:0a:01))"}); got != nil {
		t.Errorf("a reply without output: %v", got)
	}
}
