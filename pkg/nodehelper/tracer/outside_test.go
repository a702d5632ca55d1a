package tracer

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// gatewayNode is an OVN-Kubernetes node in its shared gateway mode: br-int
// with a patch port to breth0, and breth0 holding the node's address on
// its own internal port, the uplink eth0 and the patch port back; edit
// changes breth0 before the node is returned.
func gatewayNode(edit func(breth0 *ovsdb.Bridge)) (*ovsdb.Node, *ovsdb.Bridge) {
	brInt := *mgmtBridge()
	brInt.Ports = append(brInt.Ports, ovsdb.Port{Name: "patch-br-int-to-breth0", Ofport: 4, Type: "patch", Options: map[string]string{"peer": "patch-breth0-to-br-int"}})
	breth0 := ovsdb.Bridge{Name: "breth0", Ports: []ovsdb.Port{
		{Name: "breth0", Ofport: 65534, Type: "internal", MAC: "02:42:ac:12:00:03"},
		{Name: "eth0", Ofport: 1},
		{Name: "patch-breth0-to-br-int", Ofport: 2, Type: "patch", Options: map[string]string{"peer": "patch-br-int-to-breth0"}},
	}}
	if edit != nil {
		edit(&breth0)
	}
	n := &ovsdb.Node{Bridges: []ovsdb.Bridge{breth0, brInt}}
	return n, &n.Bridges[1]
}

func TestUplinkBridge(t *testing.T) {
	dropPatch := func(b *ovsdb.Bridge) { b.Ports = b.Ports[:2] }
	for name, tc := range map[string]struct {
		edit      func(*ovsdb.Bridge)
		dev       string
		wantErr   string
		wantLocal bool
	}{
		"OVN-Kubernetes' shared gateway": {dev: "breth0"},
		"an uplink OVS could not add is not one": {dev: "breth0", edit: func(b *ovsdb.Bridge) {
			b.Ports = append(b.Ports, ovsdb.Port{Name: "eth1", Ofport: -1})
		}},
		"the integration bridge's own port": {dev: "ovn-k8s-mp0", wantErr: "ovn-k8s-mp0 is a port of br-int itself: a packet from outside reaches the node's kernel first"},
		"on no bridge":                      {dev: "eth9", wantErr: "eth9 is no OVS bridge's own port on this node: a packet from outside reaches the node's kernel"},
		"the uplink, not the bridge's port": {dev: "eth0", wantErr: "eth0 is no OVS bridge's own port"},
		// The node's address on a bridge with no way into br-int: the
		// node's stack takes the packet first (kernelentry.go).
		"no patch port": {dev: "breth0", edit: dropPatch, wantLocal: true},
		"a patch port elsewhere": {dev: "breth0", edit: func(b *ovsdb.Bridge) { b.Ports[2].Options = map[string]string{"peer": "patch-br-ex-to-breth0"} },
			wantLocal: true},
		"no patch port, and the bridge's port unnumbered": {dev: "breth0", edit: func(b *ovsdb.Bridge) { dropPatch(b); b.Ports[0].Ofport = -1 },
			wantErr: "bridge breth0's own port breth0 has no OpenFlow port number"},
		"two uplinks": {dev: "breth0", edit: func(b *ovsdb.Bridge) { b.Ports = append(b.Ports, ovsdb.Port{Name: "eth1", Ofport: 3, Type: "system"}) },
			wantErr: "bridge breth0 has 2 ports to the outside (want one uplink)"},
		"no uplink": {dev: "breth0", edit: func(b *ovsdb.Bridge) { b.Ports = append(b.Ports[:1], b.Ports[2]) },
			wantErr: "bridge breth0 has 0 ports to the outside"},
	} {
		t.Run(name, func(t *testing.T) {
			node, brInt := gatewayNode(tc.edit)
			up, patch, err := uplinkBridge(node, brInt, tc.dev)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantLocal {
				if up.bridge.Name != "breth0" || up.port.Name != "eth0" || up.local == nil || up.local.Name != "breth0" || patch.Name != "" {
					t.Errorf("uplink %s port %s local %v patch %q; want breth0, eth0, the node's stack through breth0 and no patch port", up.bridge.Name, up.port.Name, up.local, patch.Name)
				}
				return
			}
			if up.local != nil {
				t.Errorf("a bridge with a patch port into br-int goes through the node's stack (%s)", up.local.Name)
			}
			if up.bridge.Name != "breth0" || up.port.Name != "eth0" || patch.Name != "patch-breth0-to-br-int" || len(up.hops) != 0 {
				t.Errorf("uplink %s port %s patch %s hops %d; want breth0, eth0, patch-breth0-to-br-int and no hops yet", up.bridge.Name, up.port.Name, patch.Name, len(up.hops))
			}
			if up.bridge != &node.Bridges[0] {
				t.Error("the uplink's bridge is a copy, not the node's")
			}
		})
	}
}

// The uplink bridge's hop into the integration bridge is OVS's
// prediction: reported as inferred, with the flow that sends it there.
func TestUplinkEntry(t *testing.T) {
	node, brInt := gatewayNode(nil)
	in, _ := brInt.FindPort("patch-br-int-to-breth0")
	into := ofproto.Hop{Table: 0, Match: "ip,in_port=1,nw_dst=172.18.0.3", Priority: 50, Cookie: 0xdeff105,
		Actions: []string{"ct(commit,zone=64000)", "output:2"}}
	wantObs := report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded, Inferred: true,
		ComponentInfo: "breth0, from its uplink eth0 into patch-br-int-to-breth0"}
	for name, tc := range map[string]struct {
		hops    []ofproto.Hop
		wantHop *report.Hop
	}{
		"the last hop's flow": {
			hops:    []ofproto.Hop{{Table: 0, Match: "in_port=1", Priority: 10, Cookie: 0x1, Actions: []string{"resubmit(,0)"}}, into},
			wantHop: &report.Hop{Table: 0, Flow: "ip,in_port=1,nw_dst=172.18.0.3", Priority: 50, Cookie: "0xdeff105", Actions: into.Actions},
		},
		"a later table": {
			hops:    []ofproto.Hop{{Table: 1, Match: "arp", Priority: 100, Cookie: 0x2a, Actions: []string{"output:2"}}},
			wantHop: &report.Hop{Table: 1, Flow: "arp", Priority: 100, Cookie: "0x2a", Actions: []string{"output:2"}},
		},
		"no trace yet": {},
	} {
		t.Run(name, func(t *testing.T) {
			up := &uplink{bridge: &node.Bridges[0], port: node.Bridges[0].Ports[1], hops: tc.hops}
			o, hop := up.entry(in)
			if d := cmp.Diff(wantObs, o); d != "" {
				t.Errorf("observation (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantHop, hop); d != "" {
				t.Errorf("hop (-want +got):\n%s", d)
			}
		})
	}
}

func TestOutsideSource(t *testing.T) {
	given, _ := net.ParseMAC("02:00:00:00:00:0a")
	givenDst, _ := net.ParseMAC("02:00:00:00:00:0b")
	breth0MAC, _ := net.ParseMAC("02:42:ac:12:00:03")
	gw := netip.MustParseAddr("203.0.113.1")
	viaGW := Route{Dev: "breth0", MAC: breth0MAC, Gateway: gw, Src: netip.MustParseAddr("172.18.0.3")}
	for name, tc := range map[string]struct {
		noSourceIP bool
		srcMAC     net.HardwareAddr
		dstMAC     net.HardwareAddr
		route      Route
		routeErr   error
		wantErr    string
		wantDstMAC net.HardwareAddr
	}{
		"no --source-ip":            {noSourceIP: true, srcMAC: given, route: viaGW, wantErr: "--source-outside needs --source-ip"},
		"the kernel has no route":   {srcMAC: given, routeErr: errors.New("network is unreachable"), wantErr: "the node's route to 198.51.100.7: network is unreachable"},
		"through the uplink bridge": {srcMAC: given, route: viaGW, wantDstMAC: breth0MAC},
		"--destination-mac kept":    {srcMAC: given, dstMAC: givenDst, route: viaGW, wantDstMAC: givenDst},
		"through br-int's own port": {srcMAC: given, route: Route{Dev: "ovn-k8s-mp0", MAC: breth0MAC},
			wantErr: "the node reaches 198.51.100.7 through ovn-k8s-mp0: ovn-k8s-mp0 is a port of br-int itself"},
		// No node has an ARP entry for a documentation address on breth0
		// (and this test's machine no breth0): the next hop is named.
		"no --source-mac, no ARP entry": {route: viaGW,
			wantErr: "no ARP entry for 203.0.113.1 on breth0, the outside's next hop to 198.51.100.7"},
	} {
		t.Run(name, func(t *testing.T) {
			node, brInt := gatewayNode(nil)
			s := &session{node: node, br: brInt}
			spec := TraceSpec{SourceOutside: true, SourceIP: netip.MustParseAddr("198.51.100.7"), SourceMAC: tc.srcMAC, DestinationMAC: tc.dstMAC,
				Destination: netip.MustParseAddr("172.18.0.3")}
			if tc.noSourceIP {
				spec.SourceIP = netip.Addr{}
			}
			var asked []netip.Addr
			in, up, err := s.outsideSource(&spec, func(a netip.Addr) (Route, error) { asked = append(asked, a); return tc.route, tc.routeErr })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				if tc.noSourceIP && len(asked) > 0 {
					t.Errorf("the kernel was asked for %v without a source", asked)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(asked) != 1 || asked[0] != spec.SourceIP {
				t.Errorf("the kernel was asked for %v, want the source only", asked)
			}
			if in.Name != "patch-br-int-to-breth0" || in != &brInt.Ports[3] || up.bridge.Name != "breth0" || up.port.Name != "eth0" {
				t.Errorf("in %s, uplink %s port %s; want br-int's patch-br-int-to-breth0 from breth0's eth0", in.Name, up.bridge.Name, up.port.Name)
			}
			if spec.SourceMAC.String() != given.String() || spec.DestinationMAC.String() != tc.wantDstMAC.String() {
				t.Errorf("MACs %s -> %s, want %s -> %s", spec.SourceMAC, spec.DestinationMAC, given, tc.wantDstMAC)
			}
		})
	}
}

// The probe is injected at the patch port as it arrived from the uplink:
// an uplink bridge's action that changes the packet on its way there
// (headers, VLAN, mark, NAT) stops the injection; registers, metadata and
// a ct() without nat, which the patch port leaves behind, do not.
func TestUplinkRewrite(t *testing.T) {
	for _, tc := range []struct {
		actions []string
		want    string
	}{
		{[]string{"output:2"}, ""},
		{[]string{"ct(commit,zone=64000,exec(set_field:0x1->ct_mark))", "load:0x1->NXM_NX_REG0[]", "set_field:0x5->metadata", "move:NXM_OF_IN_PORT[]->NXM_NX_REG14[]", "output:2"}, ""},
		{[]string{"set_field:0a:58:0a:f4:00:01->eth_dst", "output:2"}, "set_field:0a:58:0a:f4:00:01->eth_dst"},
		{[]string{"mod_dl_dst:0a:58:0a:f4:00:01", "output:2"}, "mod_dl_dst:0a:58:0a:f4:00:01"},
		{[]string{"ct(commit,zone=64003,nat(dst=169.254.169.3:80))", "output:2"}, "ct(commit,zone=64003,nat(dst=169.254.169.3:80))"},
		{[]string{"load:0x1->NXM_NX_PKT_MARK[]", "output:2"}, "load:0x1->NXM_NX_PKT_MARK[]"},
		{[]string{"move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]", "output:2"}, "move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]"},
		{[]string{"strip_vlan", "output:2"}, "strip_vlan"},
		{[]string{"dec_ttl", "output:2"}, "dec_ttl"},
	} {
		hops := []ofproto.Hop{{Table: 0, Actions: []string{"resubmit(,1)"}}, {Table: 1, Actions: tc.actions}}
		if got := rewrite(hops); got != tc.want {
			t.Errorf("rewrite(%q) = %q, want %q", tc.actions, got, tc.want)
		}
	}
}
