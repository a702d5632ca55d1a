package ovsdb

import (
	"net/netip"
	"slices"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func testNode() *Node {
	return Build(
		[]BridgeRow{{UUID: "b", Name: "br-int", Ports: []string{"p1", "p2", "p3", "p4"}}},
		[]PortRow{
			{UUID: "p1", Name: "antrea-pod", Interfaces: []string{"i1"}, ExternalIDs: map[string]string{"pod-name": "web", "pod-namespace": "demo", "ip": "10.0.0.5,fd00::5", "mac": "02:00:00:00:00:05"}},
			{UUID: "p2", Name: "ovnk-pod", Interfaces: []string{"i2"}},
			{UUID: "p3", Name: "tun0", Interfaces: []string{"i3"}},
			{UUID: "p4", Name: "gw0", Interfaces: []string{"i4"}, ExternalIDs: map[string]string{"antrea-type": "gateway"}},
		},
		[]InterfaceRow{
			{UUID: "i1", Name: "antrea-pod", Ofport: ptr(5)},
			{UUID: "i2", Name: "ovnk-pod", Ofport: ptr(6), ExternalIDs: map[string]string{"iface-id": "demo_db", "attached_mac": "0a:58:0a:00:00:06", "ip_addresses": "10.0.0.6/24"}},
			{UUID: "i3", Name: "tun0", Type: "geneve", Ofport: ptr(100), Options: map[string]string{"remote_ip": "flow"}},
			{UUID: "i4", Name: "gw0", Type: "internal", Ofport: ptr(2), MACInUse: ptr("02:00:00:00:00:01")},
		})
}

func TestFindPod(t *testing.T) {
	br, err := testNode().Bridge("br-int")
	if err != nil {
		t.Fatal(err)
	}
	p, m, err := br.FindPod("demo", "web")
	if err != nil || p.Ofport != 5 || m != MatchAntrea {
		t.Errorf("antrea pod: %+v %s %v", p, m, err)
	}
	p, m, err = br.FindPod("demo", "db")
	if err != nil || p.Ofport != 6 || m != MatchOVNK || p.PodMAC().String() != "0a:58:0a:00:00:06" {
		t.Errorf("ovn-k pod: %+v %s %v", p, m, err)
	}
	if _, _, err := br.FindPod("demo", "nope"); err == nil {
		t.Error("found a pod that is not there")
	}
	if ips := br.Ports[0].PodIPs(); len(ips) != 2 || ips[1] != netip.MustParseAddr("fd00::5") {
		t.Errorf("pod IPs %v", ips)
	}
	if p := br.PortByIP(netip.MustParseAddr("10.0.0.6")); p == nil || p.Name != "ovnk-pod" {
		t.Errorf("PortByIP from OVN-Kubernetes' ip_addresses: %+v", p)
	}
	if p := br.PortByIP(netip.MustParseAddr("10.0.0.5")); p == nil || p.Name != "antrea-pod" {
		t.Errorf("PortByIP: %+v", p)
	}
	if gw := br.Gateway(); gw == nil || gw.MAC != "02:00:00:00:00:01" {
		t.Errorf("gateway %+v", gw)
	}
	if tun := br.Tunnels(); len(tun) != 1 || tun[0].Name != "tun0" {
		t.Errorf("tunnels %+v", tun)
	}
	if p := br.ByOfport("100"); p == nil || !p.IsTunnel() {
		t.Errorf("ByOfport %+v", p)
	}
	if _, err := testNode().Bridge("br-ex"); err == nil {
		t.Error("found a bridge that is not there")
	}
}

func TestArrivals(t *testing.T) {
	br, err := testNode().Bridge("br-int")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range br.Arrivals() {
		got = append(got, p.Name)
	}
	// The tunnel first, then the gateway; never a pod's port.
	if want := []string{"tun0", "gw0"}; !slices.Equal(got, want) {
		t.Errorf("Arrivals() = %v, want %v", got, want)
	}
}

func TestPodName(t *testing.T) {
	for name, tc := range map[string]struct {
		port Port
		want string
	}{
		"antrea's pod-namespace and pod-name":      {Port{PortExternalIDs: map[string]string{"pod-namespace": "demo", "pod-name": "web"}}, "demo/web"},
		"ovn-kubernetes' iface-id NAMESPACE_POD":   {Port{IfaceExternalIDs: map[string]string{"iface-id": "demo_db"}}, "demo/db"},
		"ovn-kubernetes' management port k8s-NODE": {Port{Name: "ovn-k8s-mp0", Type: "internal", IfaceExternalIDs: map[string]string{"iface-id": "k8s-tf-node-1"}}, ""},
		"an iface-id with '_' on an internal port": {Port{Type: "internal", IfaceExternalIDs: map[string]string{"iface-id": "demo_db"}}, ""},
		"an iface-id with two '_'":                 {Port{IfaceExternalIDs: map[string]string{"iface-id": "net_demo_db"}}, ""},
		"an iface-id with an empty part":           {Port{IfaceExternalIDs: map[string]string{"iface-id": "_db"}}, ""},
		"nothing":                                  {Port{}, ""},
	} {
		if got := tc.port.PodName(); got != tc.want {
			t.Errorf("%s: PodName() = %q, want %q", name, got, tc.want)
		}
	}
}

func TestPodPrefixes(t *testing.T) {
	br, err := testNode().Bridge("br-int")
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := br.FindPod("demo", "db")
	if got := p.PodPrefixes(); len(got) != 1 || got[0] != netip.MustParsePrefix("10.0.0.6/24") {
		t.Errorf("OVN-Kubernetes' ip_addresses: prefixes %v, want [10.0.0.6/24]", got)
	}
	a, _, _ := br.FindPod("demo", "web")
	if got := a.PodPrefixes(); len(got) != 0 {
		t.Errorf("Antrea's ip records no prefix: got %v", got)
	}
}
