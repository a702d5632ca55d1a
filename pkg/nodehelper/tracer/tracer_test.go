package tracer

import (
	"bytes"
	"net/netip"
	"strconv"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

func TestComponent(t *testing.T) {
	for name, want := range map[string]report.Component{
		"SpoofGuard": report.ComponentSpoofGuard, "ARPSpoofGuard": report.ComponentSpoofGuard,
		"IngressRule": report.ComponentNetworkPolicy, "IngressDefaultRule": report.ComponentNetworkPolicy,
		"EgressRule": report.ComponentNetworkPolicy, "AntreaPolicyIngressRule": report.ComponentNetworkPolicy,
		"IngressMetric": report.ComponentNetworkPolicy, "EgressSecurityClassifier": report.ComponentNetworkPolicy,
		"ServiceLB": report.ComponentLB, "EndpointDNAT": report.ComponentLB, "SessionAffinity": report.ComponentLB,
		"EgressMark": report.ComponentEgress, "SNAT": report.ComponentEgress,
		"L3Forwarding": report.ComponentRouting, "L3DecTTL": report.ComponentRouting,
		"Classifier": report.ComponentForwarding, "Output": report.ComponentForwarding, "": report.ComponentForwarding,
	} {
		if got := Component(name); got != want {
			t.Errorf("Component(%q) = %s, want %s", name, got, want)
		}
	}
}

func testBridge() *ovsdb.Bridge {
	return &ovsdb.Bridge{Name: "br-int", Ports: []ovsdb.Port{
		{Name: "pod-b", Ofport: 3, PortExternalIDs: map[string]string{"pod-name": "b", "pod-namespace": "ns"}},
		{Name: "tun0", Ofport: 100, Type: "geneve", Options: map[string]string{"remote_ip": "flow"}},
		{Name: "vx", Ofport: 101, Type: "vxlan", Options: map[string]string{"remote_ip": "192.0.2.9"}},
		{Name: "gw0", Ofport: 2, Type: "internal"},
	}}
}

func TestClassify(t *testing.T) {
	br := testBridge()
	for name, tc := range map[string]struct {
		hop       ofproto.Hop
		tunnelDst string
		want      report.Action
		wantDst   string
	}{
		"pod port":          {ofproto.Hop{Actions: []string{"output:3"}}, "", report.ActionDelivered, ""},
		"pod via register":  {ofproto.Hop{Actions: []string{"output:NXM_NX_REG1[]", "-> output port is 3"}}, "", report.ActionDelivered, ""},
		"tunnel from trace": {ofproto.Hop{Actions: []string{"output:100"}}, "192.0.2.1", report.ActionForwarded, "192.0.2.1"},
		"tunnel option":     {ofproto.Hop{Actions: []string{"output:101"}}, "", report.ActionForwarded, "192.0.2.9"},
		"tunnel own-address remark": {ofproto.Hop{Actions: []string{"output:100", ">> Not tunneling to our own address"}}, "",
			report.ActionForwarded, ""},
		"gateway":          {ofproto.Hop{Actions: []string{"output:2"}}, "", report.ActionForwardedOutOfNetwork, ""},
		"next table":       {ofproto.Hop{Actions: []string{"goto_table:5"}}, "", report.ActionForwarded, ""},
		"drop":             {ofproto.Hop{Actions: []string{"drop"}}, "", report.ActionDropped, ""},
		"no actions":       {ofproto.Hop{}, "", report.ActionDropped, ""},
		"table miss":       {ofproto.Hop{NoMatch: true}, "", report.ActionDropped, ""},
		"nonexistent port": {ofproto.Hop{Actions: []string{"output:9", ">> Nonexistent output port"}}, "", report.ActionDropped, ""},
	} {
		t.Run(name, func(t *testing.T) {
			v := Classify(tc.hop, br, tc.tunnelDst)
			if v.Action != tc.want || v.TunnelDst != tc.wantDst {
				t.Errorf("got %s to %q, want %s to %q", v.Action, v.TunnelDst, tc.want, tc.wantDst)
			}
		})
	}
}

func TestObservation(t *testing.T) {
	names := TableNames{20: "Output", 13: "IngressDefaultRule"}
	br := testBridge()
	o := Observation(ofproto.Hop{Table: 20}, Verdict{Action: report.ActionDelivered, Port: &br.Ports[0]}, names)
	if o != (report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionDelivered, Pod: "ns/b"}) {
		t.Errorf("delivered: %+v", o)
	}
	o = Observation(ofproto.Hop{Table: 13}, Verdict{Action: report.ActionDropped}, names)
	if o.Component != report.ComponentNetworkPolicy || o.ComponentInfo != "IngressDefaultRule" {
		t.Errorf("dropped: %+v", o)
	}
	if o := Observation(ofproto.Hop{Table: 7}, Verdict{Action: report.ActionForwarded}, names); o.ComponentInfo != "table 7" {
		t.Errorf("unnamed table: %+v", o)
	}
}

func TestUserdataRoundTrip(t *testing.T) {
	tag, kind, hop, cand, ok := ParseUserdata(userdata(9, kindMiss, 300, 2))
	if !ok || tag != 9 || kind != kindMiss || hop != 300 || cand != 2 {
		t.Errorf("got %d %d %d %d %v", tag, kind, hop, cand, ok)
	}
	if _, _, _, _, ok := ParseUserdata([]byte("not ours")); ok {
		t.Error("foreign userdata accepted")
	}
	if c := TraceCookie(5, 0xdeadbeef); c&cookieMask != c || c>>48 != 0x7466 || uint8(c>>40) != 5 {
		t.Errorf("cookie %#x", c)
	}
}

func TestBuildPlan(t *testing.T) {
	tr := ofproto.Trace{Hops: []ofproto.Hop{
		{Table: 0, Priority: 190, Cookie: 0x10},                     // two candidates
		{Table: 1, Priority: 200, Cookie: 0x11, Match: "ip"},        // already IP
		{Table: 2, Priority: 5, Cookie: 0x12, Match: "ip,nw_tos=4"}, // matches DSCP: skipped
		{Table: 3, Priority: 1, Cookie: 0x13, Match: "arp"},         // not IP: skipped
		{Table: 0, Priority: 190, Cookie: 0x10},                     // visited again
		{Table: 9, NoMatch: true},                                   // table miss
		{Table: 8, Priority: 7, Cookie: 0x99},                       // flow vanished
	}}
	flows := map[uint8][]openflow.FlowDesc{
		0: {{TableID: 0, Priority: 190, Cookie: 0x10, Match: openflow.InPortField(1)},
			{TableID: 0, Priority: 190, Cookie: 0x10, Match: openflow.InPortField(2)},
			{TableID: 0, Priority: 100, Cookie: 0x10, Match: openflow.InPortField(3)}},
		1: {{TableID: 1, Priority: 200, Cookie: 0x11, Match: openflow.EthTypeField(0x800)}},
		2: {{TableID: 2, Priority: 5, Cookie: 0x12, Match: append(openflow.EthTypeField(0x800), openflow.DSCPField(1)...)}},
		3: {{TableID: 3, Priority: 1, Cookie: 0x13, Match: openflow.EthTypeField(0x806)}},
	}
	p, err := BuildPlan(PlanInput{Trace: tr, Flows: flows, Tag: 5, EthType: 0x800, Cookie: TraceCookie(5, 1), ControllerID: 9, HardTimeout: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.FlowMods) != 4 { // 2 candidates in table 0, 1 in table 1, 1 miss flow
		t.Errorf("%d flow mods, want 4", len(p.FlowMods))
	}
	wantWatched := []bool{true, true, false, false, true, true, false}
	for i, w := range wantWatched {
		if p.Watched[i] != w {
			t.Errorf("hop %d watched %v, want %v (skipped: %q)", i, p.Watched[i], w, p.Skipped[i])
		}
	}
	// The copy of table 0's flow matches eth_type and the tag besides in_port.
	if !bytes.Contains(p.FlowMods[0], append(openflow.EthTypeField(0x800), openflow.DSCPField(5)...)) {
		t.Errorf("copy lacks eth_type and tag: %x", p.FlowMods[0])
	}
	// Table 0's two flows with the hop's priority and cookie are kept in
	// candidate order, so that a packet-in names the one that matched.
	if sibs := p.Siblings[0]; len(sibs) != 2 || openflow.FormatMatch(sibs[1].Match) != "in_port=2" || len(p.Siblings) != 1 {
		t.Errorf("siblings %+v, want hop 0's two flows (in_port=1, in_port=2) only", p.Siblings)
	}
	observed := make([]bool, len(tr.Hops))
	observed[0] = true
	if i := NoteObserved(tr, observed, 0); i != 4 {
		t.Errorf("second visit of table 0's flow maps to hop %d, want 4", i)
	}
}

func TestFinal(t *testing.T) {
	br := testBridge()
	tr := ofproto.Trace{Hops: []ofproto.Hop{{Table: 0, Actions: []string{"goto_table:1"}}, {Table: 1, Actions: []string{"output:3"}}, {Table: 2, Actions: []string{"goto_table:3"}}}}
	if i, v := Final(tr, br); i != 1 || v.Action != report.ActionDelivered {
		t.Errorf("final hop %d %s", i, v.Action)
	}
	tr = ofproto.Trace{Hops: []ofproto.Hop{{Table: 0, Actions: []string{"goto_table:1"}}, {Table: 1, Actions: []string{"resubmit(,2)"}}}}
	if i, v := Final(tr, br); i != 1 || v.Action != report.ActionDropped {
		t.Errorf("path without output: hop %d %s", i, v.Action)
	}
}

func TestMetadataFlowAndOpenEnded(t *testing.T) {
	md := openflow.Metadata{InPort: 3, HasTunID: true, TunID: 5, CtState: 0x21, CtZone: 65520, CtMark: 0x10}
	md.Regs[1], md.RegsSet = 0x64, 1<<1
	want := "in_port=3,pkt_mark=0x74661000,reg1=0x64,tun_id=0x5,ct_state=0x21,ct_zone=65520,ct_mark=0x10"
	if got := metadataFlow(md, markTramp); got != want {
		t.Errorf("metadataFlow = %q, want %q", got, want)
	}
	md.HasMeta, md.Meta = true, 7
	md.CtLabel[15] = 1
	md.CtNwSrc, md.CtNwDst = netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.96.0.10")
	md.CtNwProto, md.CtTpSrc, md.CtTpDst = 6, 50000, 80
	want = "in_port=3,pkt_mark=0x74661000,reg1=0x64,metadata=0x7,tun_id=0x5,ct_state=0x21,ct_zone=65520,ct_mark=0x10" +
		",ct_label=0x00000000000000000000000000000001,ct_nw_src=10.0.0.1,ct_nw_dst=10.96.0.10,ct_nw_proto=6,ct_tp_src=50000,ct_tp_dst=80"
	if got := metadataFlow(md, markTramp); got != want {
		t.Errorf("metadataFlow with OVN's datapath and a conntrack tuple = %q, want %q", got, want)
	}
	if !openEnded(ofproto.Trace{Hops: []ofproto.Hop{{}}, DatapathActions: "hash(sym_l4(0)),recirc(0x2)"}) ||
		openEnded(ofproto.Trace{Hops: []ofproto.Hop{{}}, DatapathActions: "3"}) {
		t.Error("openEnded")
	}
}

func TestPassEndAndRecircHop(t *testing.T) {
	hops := []ofproto.Hop{
		{Table: 0, Actions: []string{"goto_table:5"}},
		{Table: 5, Actions: []string{"ct(table=6,zone=65520,nat)", "nat", "-> A clone of the packet is forked to recirculate. The forked pipeline will be resumed at table 6."}},
		{Table: 73, NoMatch: true},
		{Table: 6, Pass: 1, Actions: []string{"goto_table:8"}},
		{Table: 8, Pass: 1, Actions: []string{"group:1"}},
	}
	if got := passEnd(hops, 0); got != 3 {
		t.Errorf("passEnd(0) = %d, want 3", got)
	}
	if got := passEnd(hops, 3); got != 5 {
		t.Errorf("passEnd(3) = %d, want 5", got)
	}
	// The conntrack hop, not the subroutine's miss printed after it.
	if got := recircHop(hops[:3], 0); got != 1 {
		t.Errorf("recircHop = %d, want 1 (the ct hop)", got)
	}
	if got := recircHop(hops, 3); got != 4 {
		t.Errorf("recircHop from 3 = %d, want 4 (the group hop)", got)
	}
}

// The hop that must mark the probe for a continuation is watched only if a
// copy of its own sets the mark: a flow already copied for an earlier hop
// fires with that copy's actions, which set no mark.
func TestBuildPlanMarkHopNeedsItsOwnCopy(t *testing.T) {
	tr := ofproto.Trace{Hops: []ofproto.Hop{
		{Table: 5, Priority: 200, Cookie: 0x12, Match: "ip"},
		{Table: 6, Priority: 200, Cookie: 0x13, Match: "ip"},
		{Table: 5, Priority: 200, Cookie: 0x12, Match: "ip"}, // the same flow again, where the path recirculates
	}}
	flows := map[uint8][]openflow.FlowDesc{
		5: {{TableID: 5, Priority: 200, Cookie: 0x12, Match: openflow.EthTypeField(0x800)}},
		6: {{TableID: 6, Priority: 200, Cookie: 0x13, Match: openflow.EthTypeField(0x800)}},
	}
	in := PlanInput{Trace: tr, Flows: flows, Tag: 5, EthType: 0x800, Cookie: TraceCookie(5, 1), ControllerID: 9, HardTimeout: 10}
	for name, tc := range map[string]struct {
		markHop     int
		wantWatched bool
	}{"a hop with its own copy": {1, true}, "a second visit": {2, false}} {
		in.Mark, in.MarkHop = markCont, tc.markHop
		p, err := BuildPlan(in)
		if err != nil {
			t.Fatal(err)
		}
		if p.Watched[tc.markHop] != tc.wantWatched {
			t.Errorf("%s: mark hop watched %v, want %v (%q)", name, p.Watched[tc.markHop], tc.wantWatched, p.Skipped[tc.markHop])
		}
	}
}

// Concurrent traces on one node must never install the same trampoline or
// bump match: OVS would keep one flow for both, and one trace would go on
// through the other's trampoline (seen as a false "drop" at the output table
// of an inter-node probe in a 27-trace suite).
func TestOwnMarksDifferPerTag(t *testing.T) {
	seen := map[uint32]string{}
	for _, base := range []struct {
		name string
		mark uint32
	}{{"tramp", markTramp}, {"bump", markBump}} {
		for tag := uint8(1); tag <= 63; tag++ {
			m := ownMark(base.mark, tag)
			if prev, dup := seen[m]; dup {
				t.Fatalf("%s mark of tag %d = %#x, already %s", base.name, tag, m, prev)
			}
			if m == markCont {
				t.Fatalf("%s mark of tag %d is the continuation mark", base.name, tag)
			}
			seen[m] = base.name + " of tag " + strconv.Itoa(int(tag))
		}
	}
	md := openflow.Metadata{InPort: 3}
	if got, want := metadataFlow(md, ownMark(markTramp, 7)), "in_port=3,pkt_mark=0x74661007"; got != want {
		t.Errorf("metadataFlow = %q, want %q", got, want)
	}
}
