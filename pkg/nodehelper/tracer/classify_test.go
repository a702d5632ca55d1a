package tracer

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// The recorded traces live with the parser (see its testdata/README.md).
const recorded = "../ofproto/testdata"

// recordedOVS are the sets of traces the same scripts recorded with each Open
// vSwitch the helper is held to: Debian 12's 3.1 (the lab's lab and antrea
// modes) and 4.0 (the fixture's, which the OVN modes run). The packets, the
// pipelines and the verdicts are the same; the parsers must read both.
var recordedOVS = []struct{ version, dir string }{
	{"OVS 3.1", recorded},
	{"OVS 4.0", filepath.Join(recorded, "ovs-4.0")},
}

func readRecorded(t *testing.T, name string) string {
	t.Helper()
	return readRecordedIn(t, recorded, name)
}

func readRecordedIn(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The bridges of the recordings, as OVSDB describes them.
func ovsNode() *ovsdb.Bridge {
	return &ovsdb.Bridge{Name: "br-int", Ports: []ovsdb.Port{
		{Name: "pod1", Ofport: 1, PortExternalIDs: map[string]string{"pod-name": "pod-a", "pod-namespace": "rec"}},
		{Name: "pod2", Ofport: 2, PortExternalIDs: map[string]string{"pod-name": "pod-b", "pod-namespace": "rec"}},
		{Name: "gw0", Ofport: 3, Type: "internal"},
		{Name: "tun0", Ofport: 100, Type: "geneve", Options: map[string]string{"remote_ip": "flow", "key": "flow"}},
		{Name: "br-int", Ofport: 65534, Type: "internal"},
	}}
}

func ovnNode1() *ovsdb.Bridge {
	return &ovsdb.Bridge{Name: "br-int", Ports: []ovsdb.Port{
		{Name: "ovn-rec-no-0", Ofport: 1, Type: "geneve", Options: map[string]string{"remote_ip": "172.31.88.2", "key": "flow", "csum": "true"}},
		{Name: "pod-a", Ofport: 2, IfaceExternalIDs: map[string]string{"iface-id": "rec_pod-a"}},
		{Name: "pod-c", Ofport: 3, IfaceExternalIDs: map[string]string{"iface-id": "rec_pod-c"}},
		{Name: "br-int", Ofport: 65534, Type: "internal"},
	}}
}

func ovnNode2() *ovsdb.Bridge {
	return &ovsdb.Bridge{Name: "br-int", Ports: []ovsdb.Port{
		{Name: "ovn-rec-no-0", Ofport: 1, Type: "geneve", Options: map[string]string{"remote_ip": "172.31.88.1", "key": "flow", "csum": "true"}},
		{Name: "pod-b", Ofport: 2, IfaceExternalIDs: map[string]string{"iface-id": "rec_pod-b"}},
		{Name: "br-int", Ofport: 65534, Type: "internal"},
	}}
}

// TestFinalOnRecordedTraces feeds real ofproto/trace outputs (a small
// pipeline on a throwaway OVS, and real OVN on two chassis) to the parser
// and the classifier: the verdict must be what the trace's datapath actions
// say, decided at the hop that did it.
func TestFinalOnRecordedTraces(t *testing.T) {
	for name, tc := range map[string]recordedCase{
		"output:reg to a pod":                 {"ovs-delivered.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionDelivered, "pod2", "", 20, 0, false},
		"native tunnel through br-phy":        {"ovs-tunnel.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionForwarded, "tun0", "172.31.77.2", 20, 0, false},
		"drop action":                         {"ovs-drop.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionDropped, "", "", 15, 0, false},
		"reject as Antrea encodes it":         {"ovs-reject.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionRejected, "", "", 15, 0, false},
		"miss on the main path, not in a sub": {"ovs-nomatch.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionDropped, "", "", 1, 0, false},
		"LOCAL":                               {"ovs-local.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionForwardedOutOfNetwork, "br-int", "", 1, 0, false},
		"gateway":                             {"ovs-gateway.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionForwardedOutOfNetwork, "gw0", "", 1, 0, false},
		"two outputs, one skipped (in_port)":  {"ovs-multi.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionDelivered, "pod2", "", 1, 0, false},
		"dp_hash group stops the trace":       {"ovs-service.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionForwarded, "", "", 1, 0, true},
		"hairpin through the Service:IN_PORT": {"ovs-service-hairpin.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionDelivered, "pod1", "", 20, 0, false},
		"Service's other endpoint":            {"ovs-service-other.txt", "dpif-show-ovs.txt", ovsNode(), report.ActionDelivered, "pod2", "", 20, 0, false},
		"OVN pod to pod across nodes":         {"ovn-cross-node.txt", "dpif-show-ovn-n1.txt", ovnNode1(), report.ActionForwarded, "ovn-rec-no-0", "172.31.88.2", 39, 2, false},
		"OVN pod to pod on one node":          {"ovn-same-node.txt", "dpif-show-ovn-n1.txt", ovnNode1(), report.ActionDelivered, "pod-c", "", 65, 0, false},
		"OVN load balancer (dp_hash group)":   {"ovn-lb.txt", "dpif-show-ovn-n1.txt", ovnNode1(), report.ActionForwarded, "", "", 20, 0, true},
		"OVN load balancer, one backend":      {"ovn-lb-one.txt", "dpif-show-ovn-n1.txt", ovnNode1(), report.ActionForwarded, "", "", 20, 0, true},
		"OVN receiver from the tunnel":        {"ovn-receiver.txt", "dpif-show-ovn-n2.txt", ovnNode2(), report.ActionDelivered, "pod-b", "", 65, 0, false},
		"OVN ACL drop on the receiver":        {"ovn-acl-drop.txt", "dpif-show-ovn-n2.txt", ovnNode2(), report.ActionDropped, "", "", 46, 0, false},
		"OVN ACL reject on the receiver":      {"ovn-acl-reject.txt", "dpif-show-ovn-n2.txt", ovnNode2(), report.ActionRejected, "", "", 46, 0, false},
		"without dpif/show: the hops' output": {"tunnel-after-ct.txt", "", testBridge(), report.ActionForwarded, "tun0", "192.168.77.2", 20, 0, false},
		// OVS's trace, resuming after conntrack, takes the tun_dst the
		// pipeline set for the tunnel the packet came from and refuses to
		// tunnel it ("Not tunneling to our own address", datapath actions
		// "drop"); the datapath tunnels it (the integration tests see the
		// probe arrive). tun0's remote_ip is flow: the watch takes the
		// destination from the real packet.
		"tunnel the trace refuses after conntrack": {"ovs-tunnel-refused-after-ct.txt", "dpif-show-integration.txt", testBridge(), report.ActionForwarded, "tun0", "", 20, 0, false},
	} {
		for _, set := range recordedOVS {
			_, err := os.Stat(filepath.Join(set.dir, tc.trace))
			switch {
			case err == nil:
				t.Run(set.version+"/"+name, func(t *testing.T) { finalOnRecorded(t, set.dir, tc) })
			case set.dir == recorded || !recordedOnlyOnce[tc.trace]:
				t.Errorf("%s: %s not recorded (%v): record-ovs.sh and record-ovn.sh record every scripted trace with each OVS", set.version, tc.trace, err)
			}
		}
	}
}

// recordedCase is one recorded trace and the verdict it must give.
type recordedCase struct {
	trace, dpif string
	br          *ovsdb.Bridge
	want        report.Action
	port        string // the port left by (Port.Name or PortName)
	tunnelDst   string
	table       uint8 // of the deciding hop
	depth       int
	open        bool
}

// recordedOnlyOnce are the recordings no script makes again (see
// testdata/README.md): they exist for OVS 3.1 only.
var recordedOnlyOnce = map[string]bool{"tunnel-after-ct.txt": true, "ovs-tunnel-refused-after-ct.txt": true}

func finalOnRecorded(t *testing.T, dir string, tc recordedCase) {
	t.Helper()
	tr := ofproto.Parse(readRecordedIn(t, dir, tc.trace), "br-int")
	if tc.dpif != "" {
		tr.Ports = ofproto.ParseDpifShow(readRecordedIn(t, dir, tc.dpif))
	}
	i, v := Final(tr, tc.br)
	if i < 0 {
		t.Fatalf("no deciding hop; verdict %+v", v)
	}
	port := v.PortName
	if v.Port != nil {
		port = v.Port.Name
	}
	h := tr.Hops[i]
	if v.Action != tc.want || port != tc.port || v.TunnelDst != tc.tunnelDst || v.Open != tc.open {
		t.Errorf("verdict %s port %q tunnel %q open %v, want %s %q %q %v (%s)",
			v.Action, port, v.TunnelDst, v.Open, tc.want, tc.port, tc.tunnelDst, tc.open, v.Reason)
	}
	if h.Table != tc.table || h.Depth != tc.depth {
		t.Errorf("decided at hop %d table %d depth %d, want table %d depth %d", i, h.Table, h.Depth, tc.table, tc.depth)
	}
	// The one trace whose datapath actions are wrong (see its case).
	if tc.trace != "ovs-tunnel-refused-after-ct.txt" {
		checkAgainstDatapath(t, tr, v)
	}
}

// checkAgainstDatapath asserts the verdict says what the datapath actions
// say, independently of how Final got there.
func checkAgainstDatapath(t *testing.T, tr ofproto.Trace, v Verdict) {
	t.Helper()
	fate := ofproto.ParseDatapathActions(tr.DatapathActions)
	switch v.Action {
	case report.ActionDropped, report.ActionRejected:
		if len(fate.Outputs) > 0 {
			t.Errorf("%s, but the datapath outputs: %s", v.Action, tr.DatapathActions)
		}
	case report.ActionForwarded:
		if v.Open != (fate.Recirc && len(fate.Outputs) == 0) {
			t.Errorf("open %v, datapath actions %s", v.Open, tr.DatapathActions)
		}
	}
	if v.Port == nil || len(tr.Ports) == 0 {
		return
	}
	var dps []uint32
	for _, o := range fate.Outputs {
		dps = append(dps, o.Port)
	}
	for _, p := range tr.Ports {
		if p.Bridge == tr.Bridge && p.OFPort == v.Port.Ofport {
			if !slices.Contains(dps, p.DPPort) {
				t.Errorf("verdict's port %s is datapath port %d, not among the outputs %v", v.Port.Name, p.DPPort, dps)
			}
			return
		}
	}
	t.Errorf("verdict's port %s (ofport %s) is not in dpif/show", v.Port.Name, strconv.Itoa(v.Port.Ofport))
}

func TestFinalSeveralOutputs(t *testing.T) {
	// A flood to the gateway and a pod: the pod's output decides, the
	// gateway's is reported with it.
	tr := ofproto.Trace{Bridge: "br-int", DatapathActions: "6,5", Hops: []ofproto.Hop{
		{Table: 0, Actions: []string{"goto_table:1"}},
		{Table: 1, Actions: []string{"output:3", "output:2"}},
	}, Ports: ofproto.ParseDpifShow(readRecorded(t, "dpif-show-ovs.txt"))}
	i, v := Final(tr, ovsNode())
	if i != 1 || v.Action != report.ActionDelivered || v.Port.Name != "pod2" || len(v.Also) != 1 ||
		v.Also[0].Action != report.ActionForwardedOutOfNetwork || v.Also[0].Port.Name != "gw0" {
		t.Errorf("hop %d verdict %+v", i, v)
	}
}

func TestFinalOtherBridgeAndController(t *testing.T) {
	ports := ofproto.ParseDpifShow(readRecorded(t, "dpif-show-ovs.txt"))
	// Datapath port 2 is br-phy's upl0: a patch port took the packet there.
	tr := ofproto.Trace{Bridge: "br-int", DatapathActions: "2", Ports: ports,
		Hops: []ofproto.Hop{{Table: 0, Actions: []string{"output:7"}}}}
	if _, v := Final(tr, ovsNode()); v.Action != report.ActionForwardedOutOfNetwork || v.PortName != "br-phy/upl0" {
		t.Errorf("other bridge: %+v", v)
	}
	// A packet-in that is no reject (Antrea's Traceflow category 0).
	tr = ofproto.Trace{Bridge: "br-int", DatapathActions: "userspace(pid=0,controller(reason=1,dont_send=1,continuation=0,recirc_id=2,rule_cookie=0,controller_id=0,max_len=65535))",
		Ports: ports, Hops: []ofproto.Hop{{Table: 0, Actions: []string{"goto_table:3"}}, {Table: 3, Actions: []string{"controller(userdata=00.01)"}}}}
	if i, v := Final(tr, ovsNode()); i != 1 || v.Action != report.ActionDropped {
		t.Errorf("controller, no reject: hop %d %+v", i, v)
	}
}

// OVN's arp {} and nd_ns {} hand the packet to ovn-controller, which
// resolves the next hop's MAC and sends the packet on later: neither a
// drop nor a delivery, and not complete (Open, exit 3), whether the trace
// has datapath actions or only its hops.
func TestNextHopResolutionIsHeldNotDropped(t *testing.T) {
	for _, tc := range []struct {
		userdata, what string
		held           bool
	}{
		{"00.00.00.00.00.00.00.00.ff", "an ARP request", true},
		{"00.00.00.09.00.00.00.00.ff", "a neighbor solicitation", true},
		{"00.00.00.01.00.00.00.00", "", false},    // put_arp: no resolution
		{"00.00.00.00.00.00.00.01.ff", "", false}, // not OVN's padding
	} {
		hops := []ofproto.Hop{{Table: 0, Actions: []string{"resubmit(,8)"}}, {Table: 8, Actions: []string{"controller(userdata=" + tc.userdata + ")"}}}
		for _, dp := range []string{"userspace(pid=0,controller(reason=1,dont_send=0,continuation=0,recirc_id=5,rule_cookie=0x0,controller_id=0,max_len=65535))", "",
			// A gateway router's first packet to the lab's host on the
			// genuine OVN-Kubernetes: the pause is inside check_pkt_len's
			// branch, which shows no controller action of its own.
			"set(skb_mark(0)),ct(commit,zone=20,mark=0/0x41,nat(src)),check_pkt_len(size=1414,gt(sample(sample=100.0%,actions(meter(3),userspace(pid=0,controller(reason=1,dont_send=1,continuation=0,recirc_id=824,rule_cookie=0x404820ff,controller_id=0,max_len=65535))))),le(set(eth(src=02:00:0a:59:00:0b,dst=00:00:00:00:00:00)),set(ipv4(ttl=62))))"} {
			i, v := Final(ofproto.Trace{Bridge: "br-int", DatapathActions: dp, Hops: hops}, ovsNode())
			if v.Held != tc.held || (tc.held && (i != 1 || !v.Open || v.Action != report.ActionForwarded || !strings.Contains(v.Reason, tc.what))) {
				t.Errorf("userdata %s, datapath actions %q: hop %d %+v; want held %v (%s)", tc.userdata, dp, i, v, tc.held, tc.what)
			}
			if tc.held && exitCode(v) != ExitTimeout {
				t.Errorf("userdata %s: exit %d, want %d (not complete)", tc.userdata, exitCode(v), ExitTimeout)
			}
		}
	}
}

func TestIsReject(t *testing.T) {
	for a, want := range map[string]bool{
		"controller(userdata=01.02)":                      true,  // Antrea NetworkPolicy reject
		"controller(id=27745,userdata=01.02)":             true,  // the lab's
		"controller(userdata=01.07,pause)":                true,  // reject + logging + deny tracking
		"controller(userdata=01.01)":                      false, // Antrea logging only
		"controller(userdata=04)":                         true,  // Antrea Service without endpoints
		"controller(userdata=00.01)":                      false, // Antrea Traceflow
		"controller(userdata=00.00.00.16.00.00.00.00.ff)": true,  // OVN reject {}
		"controller(userdata=00.00.00.0b.00.00.00.00.ff)": true,  // OVN tcp_reset {}
		"controller(userdata=00.00.00.0a.00.00.00.00.ff)": true,  // OVN icmp4 {}
		"controller(userdata=00.00.00.00.00.00.00.00.ff)": false, // OVN arp {}
		"controller(userdata=00.00.00.16.00.00.00.01)":    false, // not OVN's padding
		"CONTROLLER:65535":                                false,
		"controller(reason=no_match)":                     false,
	} {
		c, ok := ofproto.ParseController(a)
		if !ok {
			t.Errorf("%s: not parsed", a)
			continue
		}
		if got := IsReject(c); got != want {
			t.Errorf("IsReject(%s) = %v, want %v", a, got, want)
		}
	}
}
