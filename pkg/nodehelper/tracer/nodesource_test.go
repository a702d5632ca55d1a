package tracer

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
)

// mgmtBridge is OVN-Kubernetes' br-int as the node sees it: a pod and
// the management port, through which the node reaches the pod network.
func mgmtBridge() *ovsdb.Bridge {
	return &ovsdb.Bridge{Name: "br-int", Ports: []ovsdb.Port{
		{Name: "br-int", Ofport: 65534, Type: "internal"},
		{Name: "ovn-k8s-mp0", Ofport: 2, Type: "internal", MAC: "0a:58:0a:f4:00:02", IfaceExternalIDs: map[string]string{"iface-id": "k8s-tf-node-1"}},
		{Name: "veth1", Ofport: 3, IfaceExternalIDs: map[string]string{"iface-id": "ns_a", "attached_mac": "0a:58:0a:f4:00:05", "ip_addresses": "10.244.0.5/24"}},
	}}
}

func TestSourcePortNode(t *testing.T) {
	mp0MAC, _ := net.ParseMAC("0a:58:0a:f4:00:02")
	for name, tc := range map[string]struct {
		route   Route
		err     error
		wantErr string
		wantHop string
	}{
		"remote pod through the router": {route: Route{Dev: "ovn-k8s-mp0", MAC: mp0MAC, Gateway: netip.MustParseAddr("10.244.0.1"), Src: netip.MustParseAddr("10.244.0.2")}, wantHop: "10.244.0.1"},
		"local pod on link":             {route: Route{Dev: "ovn-k8s-mp0", MAC: mp0MAC, Src: netip.MustParseAddr("10.244.0.2")}, wantHop: "10.244.1.7"},
		"route off the bridge":          {route: Route{Dev: "breth0", MAC: mp0MAC, Src: netip.MustParseAddr("10.89.0.11")}, wantErr: "through breth0, which is not a port of bridge br-int"},
		"no source address":             {route: Route{Dev: "ovn-k8s-mp0", MAC: mp0MAC}, wantErr: "gives no IPv4 source address"},
		"no MAC":                        {route: Route{Dev: "ovn-k8s-mp0", Src: netip.MustParseAddr("10.244.0.2")}, wantErr: "has no MAC address"},
		"kernel error":                  {err: errors.New("network is unreachable"), wantErr: "the node's route to 10.244.1.7: network is unreachable"},
	} {
		t.Run(name, func(t *testing.T) {
			spec := TraceSpec{SourceNode: true, Destination: netip.MustParseAddr("10.244.1.7")}
			var asked netip.Addr
			p, m, err := sourcePort(mgmtBridge(), &spec, func(dst netip.Addr) (Route, error) { asked = dst; return tc.route, tc.err })
			if asked != spec.Destination {
				t.Errorf("the kernel was asked for %s, want the destination", asked)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != "ovn-k8s-mp0" || m != ovsdb.MatchNodeRoute {
				t.Errorf("port %s (%s), want ovn-k8s-mp0 by the node's route", p.Name, m)
			}
			if spec.SourceIP != tc.route.Src || spec.SourceMAC.String() != mp0MAC.String() || spec.nextHop.String() != tc.wantHop {
				t.Errorf("source %s %s next hop %s; want %s %s %s", spec.SourceIP, spec.SourceMAC, spec.nextHop, tc.route.Src, mp0MAC, tc.wantHop)
			}
		})
	}
}

func TestNodeSourceKeepsFlags(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	spec := TraceSpec{SourceNode: true, Destination: netip.MustParseAddr("10.244.1.7"), SourceIP: netip.MustParseAddr("10.244.0.99"), SourceMAC: mac}
	other, _ := net.ParseMAC("0a:58:0a:f4:00:02")
	if _, _, err := nodeSource(mgmtBridge(), &spec, Route{Dev: "ovn-k8s-mp0", MAC: other, Src: netip.MustParseAddr("10.244.0.2")}); err != nil {
		t.Fatal(err)
	}
	if spec.SourceIP.String() != "10.244.0.99" || spec.SourceMAC.String() != mac.String() {
		t.Errorf("--source-ip/--source-mac were overridden: %s %s", spec.SourceIP, spec.SourceMAC)
	}
}

// A node's probe whose next hop has no known MAC is refused: the
// gateway port's MAC, a pod's fallback, would be the node's own.
func TestProbeSpecNodeWithoutNextHopMAC(t *testing.T) {
	mac, _ := net.ParseMAC("0a:58:0a:f4:00:02")
	br := mgmtBridge()
	spec := TraceSpec{SourceNode: true, Destination: netip.MustParseAddr("10.244.1.7"), SourceIP: netip.MustParseAddr("10.244.0.2"), SourceMAC: mac,
		nextHop: netip.MustParseAddr("10.244.0.1"), Protocol: probe.TCP, DstPort: 80}
	_, err := probeSpec(br, &br.Ports[1], spec, 7)
	if err == nil || !strings.Contains(err.Error(), "next hop 10.244.0.1") {
		t.Fatalf("err %v, want the next hop's MAC unknown", err)
	}
	// To a pod of its own node the node's packet carries the pod's MAC.
	spec.Destination, spec.nextHop = netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("10.244.0.5")
	ps, err := probeSpec(br, &br.Ports[1], spec, 7)
	if err != nil || ps.DstMAC.String() != "0a:58:0a:f4:00:05" {
		t.Fatalf("probe %+v, %v: want the local pod's MAC", ps, err)
	}
}

func TestNeighborMAC(t *testing.T) {
	arp := `IP address       HW type     Flags       HW address            Mask     Device
10.244.0.1       0x1         0x2         0a:58:0a:f4:00:01     *        ovn-k8s-mp0
10.244.0.9       0x1         0x0         00:00:00:00:00:00     *        ovn-k8s-mp0
10.89.0.1        0x1         0x2         02:11:22:33:44:55     *        breth0
`
	for ip, want := range map[string]string{"10.244.0.1": "0a:58:0a:f4:00:01", "10.244.0.9": "", "10.89.0.1": "", "10.244.0.7": ""} {
		got := neighborMAC(strings.NewReader(arp), netip.MustParseAddr(ip), "ovn-k8s-mp0")
		if (got == nil && want != "") || (got != nil && got.String() != want) {
			t.Errorf("%s: got %v, want %q", ip, got, want)
		}
	}
}

func TestRouteRequestAndReply(t *testing.T) {
	dst := netip.MustParseAddr("10.244.1.7")
	req := routeRequest(dst)
	ne := binary.NativeEndian
	if int(ne.Uint32(req)) != len(req) || ne.Uint16(req[4:]) != unix.RTM_GETROUTE || req[unix.SizeofNlMsghdr] != unix.AF_INET || req[unix.SizeofNlMsghdr+1] != 32 {
		t.Fatalf("request % x", req)
	}
	if got := req[len(req)-4:]; !net.IP(got).Equal(net.ParseIP("10.244.1.7")) {
		t.Errorf("RTA_DST %v", got)
	}
	// The kernel's answer: oif 5, via 10.244.0.1, src 10.244.0.2.
	oif := ne.AppendUint32(nil, 5)
	reply := netlinkMsg(unix.RTM_NEWROUTE, append(make([]byte, unix.SizeofRtMsg),
		append(rtattr(unix.RTA_OIF, oif), append(rtattr(unix.RTA_GATEWAY, []byte{10, 244, 0, 1}), rtattr(unix.RTA_PREFSRC, []byte{10, 244, 0, 2})...)...)...))
	r, err := parseRouteReply(reply)
	if err != nil || r.ifindex != 5 || r.Gateway.String() != "10.244.0.1" || r.Src.String() != "10.244.0.2" {
		t.Fatalf("route %+v, %v", r, err)
	}
	// An error answer carries the negated errno.
	errno := -int32(unix.ENETUNREACH)
	errReply := netlinkMsg(unix.NLMSG_ERROR, ne.AppendUint32(nil, uint32(errno))) //nolint:gosec // two's complement on purpose
	if _, err := parseRouteReply(errReply); !errors.Is(err, unix.ENETUNREACH) {
		t.Errorf("error reply: %v, want ENETUNREACH", err)
	}
}

// The kernel this test runs on routes its own loopback address through lo.
func TestKernelRouteLoopback(t *testing.T) {
	r, err := KernelRoute(netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Dev != "lo" || r.Src.String() != "127.0.0.1" || r.Gateway.IsValid() {
		t.Errorf("route %+v, want lo from 127.0.0.1, on link", r)
	}
}

func netlinkMsg(typ uint16, data []byte) []byte {
	b := make([]byte, unix.SizeofNlMsghdr+len(data))
	binary.NativeEndian.PutUint32(b, uint32(len(b))) //nolint:gosec // small
	binary.NativeEndian.PutUint16(b[4:], typ)
	copy(b[unix.SizeofNlMsghdr:], data)
	return b
}

func rtattr(typ uint16, v []byte) []byte {
	b := make([]byte, unix.SizeofRtAttr+len(v))
	binary.NativeEndian.PutUint16(b, uint16(len(b))) //nolint:gosec // small
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[unix.SizeofRtAttr:], v)
	return b
}

// A probe from the node carries Antrea's host-local mark where the node's
// own packets do: on Antrea's pipeline over the kernel datapath, not over
// the userspace one (the lab's), nor on another pipeline, nor from a pod.
func TestHostMark(t *testing.T) {
	antrea := TableNames{0: "PipelineRootClassifier", 21: "IngressSecurityClassifier"}
	lab := TableNames{0: "PipelineRootClassifier", 16: "IngressRule"}
	node := TraceSpec{SourceNode: true}
	for _, tc := range []struct {
		name     string
		spec     TraceSpec
		names    TableNames
		datapath string
		want     uint32
	}{
		{"antrea, kernel datapath", node, antrea, "system", 1 << 31},
		{"antrea, default datapath", node, antrea, "", 1 << 31},
		{"antrea, userspace datapath", node, antrea, "netdev", 0},
		{"another pipeline", node, lab, "system", 0},
		{"a pod's probe", TraceSpec{SourcePod: "ns/a"}, antrea, "system", 0},
	} {
		if got := hostMark(tc.spec, tc.names, tc.datapath); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}
