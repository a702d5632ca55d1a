package agent

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	cfg = Config{GatewayIP: netip.MustParseAddr("10.244.1.1"), GatewayMAC: "02:00:0a:f4:01:01", GatewayPort: 2, TunnelPort: 1}
	a   = netip.MustParseAddr("10.244.1.2")
	b   = netip.MustParseAddr("10.244.2.2")
)

func TestTableNamesMatchTables(t *testing.T) {
	if len(TableNames) != TableOutput+1 {
		t.Fatalf("%d names for %d tables", len(TableNames), TableOutput+1)
	}
	if TableNames[TableSpoofGuard] != "SpoofGuard" || TableNames[TableOutput] != "Output" {
		t.Errorf("names out of step with numbers: %v", TableNames)
	}
}

func TestFlows(t *testing.T) {
	st := State{
		Pods:     []LocalPod{{Namespace: "ns", Name: "a", IP: a, MAC: "aa:00:00:00:00:02", OFPort: 3}},
		Nodes:    []RemoteNode{{Name: "n2", PodCIDR: netip.MustParsePrefix("10.244.2.0/24"), NodeIP: netip.MustParseAddr("10.89.0.12")}},
		Services: []ServicePort{{Key: "ns/web:http:tcp", ClusterIP: netip.MustParseAddr("10.96.0.10"), Protocol: "tcp", Port: 80, Endpoints: []Endpoint{{IP: b, Port: 8080}}}},
		Policies: Policies{
			Rules:           []Rule{{Ingress: true, Local: []netip.Addr{a}, Peers: []netip.Prefix{netip.PrefixFrom(b, 32)}, Ports: []PortProto{{Protocol: "tcp", Port: 80}}}},
			IngressIsolated: []netip.Addr{a},
		},
		GroupIDs: map[string]int{"ns/web:http:tcp": 7},
	}
	got := strings.Join(Flows(cfg, st), "\n") + "\n"
	for _, want := range []string{
		fmt.Sprintf("table=%d,priority=200,ip,in_port=3,dl_src=aa:00:00:00:00:02,nw_src=10.244.1.2 actions=goto_table:%d", TableSpoofGuard, TableUnSNAT),
		fmt.Sprintf("table=%d,priority=200,tcp,nw_dst=10.96.0.10,tp_dst=80 actions=group:7", TableServiceLB),
		fmt.Sprintf("table=%d,priority=200,tcp,reg3=0x0af40202,reg4=0x1f90/0xffff actions=ct(commit,table=%d,zone=65520,nat(dst=10.244.2.2:8080),exec(set_field:0x10/0x10->ct_mark))", TableEndpointDNAT, TableEgressRule),
		fmt.Sprintf("table=%d,priority=190,ip,nw_dst=10.244.2.0/24 actions=set_field:02:00:0a:f4:01:01->eth_src,set_field:aa:bb:cc:dd:ee:ff->eth_dst,set_field:10.89.0.12->tun_dst,goto_table:%d", TableL3Forwarding, TableL3DecTTL),
		fmt.Sprintf("table=%d,priority=200,tcp,nw_dst=10.244.1.2,nw_src=10.244.2.2/32,tp_dst=80 actions=goto_table:%d", TableIngressRule, TableConntrackCommit),
		fmt.Sprintf("table=%d,priority=200,ip,nw_dst=10.244.1.2 actions=drop", TableIngressDefaultRule),
		fmt.Sprintf("table=%d,priority=200,reg0=0x10000/0x10000 actions=output:NXM_NX_REG1[]", TableOutput),
		// Only the node's own address is exempt from ingress policy, not
		// pods of other nodes routed in through the gateway.
		fmt.Sprintf("table=%d,priority=210,ip,reg0=0x2/0xf,nw_src=10.244.1.1 actions=goto_table:%d", TableIngressRule, TableConntrackCommit),
		fmt.Sprintf("table=%d,priority=200,dl_dst=02:00:0a:f4:01:01 actions=set_field:0x2->reg1,set_field:0x10000/0x10000->reg0,goto_table:%d", TableL2ForwardingCalc, TableConntrackCommit),
		// Hairpin: SNAT to the virtual IP, back out of the port it came in.
		fmt.Sprintf("table=%d,priority=200,ct_state=+new+trk,ip,nw_src=10.244.1.2,nw_dst=10.244.1.2 actions=ct(commit,table=%d,zone=65521,nat(src=169.254.0.253),exec(set_field:0x10/0x10->ct_mark))", TableSNAT, TableL2ForwardingCalc),
		fmt.Sprintf("table=%d,priority=200,ip,nw_dst=169.254.0.253 actions=ct(table=%d,zone=65521,nat)", TableUnSNAT, TableConntrackZone),
		fmt.Sprintf("table=%d,priority=210,reg0=0x10000/0x10000,reg1=0x3,in_port=3 actions=IN_PORT", TableOutput),
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing flow\n  %s\nin\n%s", want, got)
		}
	}
	g := Groups(st)
	if len(g) != 1 || !strings.HasPrefix(g[0], "group_id=7,type=select") ||
		!strings.Contains(g[0], fmt.Sprintf("set_field:0x0af40202->reg3,set_field:0x1f90/0xffff->reg4,resubmit(,%d)", TableEndpointDNAT)) {
		t.Errorf("groups: %v", g)
	}
}

// Egress: a local pod's packet to the outside network leaves through the
// gateway into the node's kernel; nothing else does, and nothing goes
// there without the network configured.
func TestEgressThroughTheGateway(t *testing.T) {
	st := State{Pods: []LocalPod{{Namespace: "ns", Name: "a", IP: a, MAC: "aa:00:00:00:00:02", OFPort: 3}}}
	want := fmt.Sprintf("table=%d,priority=180,ip,reg0=0x3/0xf,nw_dst=10.89.0.0/24 actions=set_field:02:00:0a:f4:01:01->eth_dst,goto_table:%d", TableL3Forwarding, TableL3DecTTL)
	if got := strings.Join(Flows(cfg, st), "\n"); strings.Contains(got, "priority=180") {
		t.Errorf("an egress flow without an outside network:\n%s", got)
	}
	c := cfg
	c.Outside = []netip.Prefix{netip.MustParsePrefix("10.89.0.0/24")}
	if got := strings.Join(Flows(c, st), "\n") + "\n"; !strings.Contains(got, want+"\n") {
		t.Errorf("missing flow\n  %s\nin\n%s", want, got)
	}
	c.GatewayPort = 0
	if got := strings.Join(Flows(c, st), "\n"); strings.Contains(got, "priority=180") {
		t.Errorf("an egress flow on a node without a gateway:\n%s", got)
	}
}

func TestCompilePolicies(t *testing.T) {
	pod := func(ns, name, ip string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Status: corev1.PodStatus{PodIP: ip, Phase: corev1.PodRunning}}
	}
	pods := []*corev1.Pod{
		pod("ns", "server", "10.244.1.2", map[string]string{"app": "server"}),
		pod("ns", "friend", "10.244.2.2", map[string]string{"role": "friend"}),
		pod("other", "stranger", "10.244.2.3", map[string]string{"role": "friend"}),
	}
	port80 := intstr.FromInt32(80)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "friend"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port80}},
			}},
		},
	}
	tests := []struct {
		name      string
		local     string
		wantRules int
		wantIso   int
	}{
		{"applied to a local pod", "10.244.1.2", 1, 1},
		{"applied pod is elsewhere", "10.244.9.9", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := CompilePolicies([]*networkingv1.NetworkPolicy{np}, pods, nil, map[netip.Addr]bool{netip.MustParseAddr(tc.local): true})
			if len(p.Rules) != tc.wantRules || len(p.IngressIsolated) != tc.wantIso || len(p.EgressIsolated) != 0 {
				t.Fatalf("got %+v", p)
			}
			if tc.wantRules == 1 {
				r := p.Rules[0]
				// Only the friend in the policy's namespace, on TCP 80.
				if len(r.Peers) != 1 || r.Peers[0].String() != "10.244.2.2/32" || len(r.Ports) != 1 || r.Ports[0] != (PortProto{"tcp", 80}) {
					t.Errorf("rule %+v", r)
				}
			}
		})
	}
}

// An ipBlock's except carves holes in its CIDR: the rule's peers cover
// every address of the CIDR but the excepted ones, and no other.
func TestIPBlockExcept(t *testing.T) {
	ps := peers([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{
		CIDR: "10.0.0.0/8", Except: []string{"10.244.1.9/32", "10.3.0.0/16", "192.168.0.0/16"},
	}}}, "ns", nil, nil)
	in := func(a string) bool {
		for _, p := range ps {
			if p.Contains(netip.MustParseAddr(a)) {
				return true
			}
		}
		return false
	}
	for a, want := range map[string]bool{
		"10.244.1.9": false, "10.244.1.8": true, "10.244.1.10": true,
		"10.3.0.1": false, "10.3.255.255": false, "10.4.0.0": true, "10.2.255.255": true,
		"10.0.0.0": true, "10.255.255.255": true, "11.0.0.0": false, "9.255.255.255": false,
	} {
		if in(a) != want {
			t.Errorf("%s in the peers %v: %v, want %v", a, ps, in(a), want)
		}
	}
	// The fewest prefixes: cutting a /32 out of a /8 leaves one sibling
	// prefix per bit below the /8 (24), a /16 one per bit (8); both holes
	// share the first split (10.3 is in the lower /9, 10.244 in the upper),
	// where neither half is kept whole: 23 + 7.
	if len(ps) != 30 {
		t.Errorf("%d prefixes, want 30: %v", len(ps), ps)
	}
	for _, p := range ps {
		for _, q := range ps {
			if p != q && p.Overlaps(q) {
				t.Errorf("%s and %s overlap", p, q)
			}
		}
	}
	if got := peers([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.1.0/24", Except: []string{"10.0.0.0/8"}}}}, "ns", nil, nil); len(got) != 0 {
		t.Errorf("a CIDR inside its except: peers %v, want none", got)
	}
}

// The drop-replies annotation drops a local pod's answers from one port,
// above the allow of established connections; a value that does not parse,
// or another node's pod, drops nothing.
func TestDroppedReplies(t *testing.T) {
	pod := func(name, ip, v string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{DropRepliesAnnotation: v}}}
		p.Status.PodIP = ip
		return p
	}
	pods := []*corev1.Pod{pod("x", a.String(), "tcp/80"), pod("y", "10.244.1.3", "http"), pod("z", b.String(), "udp/53")}
	got := DroppedReplies(pods, map[netip.Addr]bool{a: true, netip.MustParseAddr("10.244.1.3"): true})
	if len(got) != 1 || got[0] != (ReplyDrop{IP: a, Protocol: "tcp", Port: 80}) {
		t.Fatalf("DroppedReplies = %+v, want only x's tcp/80", got)
	}
	flows := strings.Join(Flows(cfg, State{DroppedReplies: got}), "\n")
	want := "table=10,priority=220,ct_state=+rpl+trk,tcp,nw_src=10.244.1.2,tp_src=80 actions=drop"
	if !strings.Contains(flows, want) {
		t.Errorf("no flow %q in\n%s", want, flows)
	}
}
