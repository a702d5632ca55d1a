package ovnk

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTopology(t *testing.T) {
	lrps, sws := Topology(
		[]Node{{Name: "n2", Subnet: netip.MustParsePrefix("10.244.2.0/24")}, {Name: "n1", Subnet: netip.MustParsePrefix("10.244.1.0/24")}},
		[]Pod{{Namespace: "demo", Name: "a", Node: "n1", UID: "u1", IP: netip.MustParseAddr("10.244.1.3")}},
	)
	wantLRPs := []LogicalRouterPort{
		{Name: "rtos-n1", MAC: "0a:58:0a:f4:01:01", Networks: []string{"10.244.1.1/24"}},
		{Name: "rtos-n2", MAC: "0a:58:0a:f4:02:01", Networks: []string{"10.244.2.1/24"}},
	}
	if d := cmp.Diff(wantLRPs, lrps); d != "" {
		t.Errorf("router ports (-want +got):\n%s", d)
	}
	want := SwitchState{
		Switch: LogicalSwitch{Name: "n1", OtherConfig: map[string]string{"subnet": "10.244.1.0/24"}},
		Ports: []LogicalSwitchPort{
			{Name: "stor-n1", Type: "router", Addresses: []string{"router"}, Options: map[string]string{"router-port": "rtos-n1"}},
			{Name: "k8s-n1", Addresses: []string{"0a:58:0a:f4:01:02 10.244.1.2"}},
			{Name: "demo_a", Addresses: []string{"0a:58:0a:f4:01:03 10.244.1.3"}, PortSecurity: []string{"0a:58:0a:f4:01:03 10.244.1.3"},
				Options:     map[string]string{"requested-chassis": "n1", "iface-id-ver": "u1"},
				ExternalIDs: map[string]string{"namespace": "demo", "pod": "true"}},
		},
		ACLs: []ACL{{Priority: 1001, Direction: "to-lport", Action: "allow-related", Match: "ip4.src==10.244.1.2",
			ExternalIDs: map[string]string{
				"k8s.ovn.org/owner-controller": "default-network-controller", "k8s.ovn.org/owner-type": "NetpolNode",
				"k8s.ovn.org/name": "n1", "ip": "10.244.1.2", "k8s.ovn.org/id": "default-network-controller:NetpolNode:n1:10.244.1.2",
			}}},
	}
	if len(sws) != 2 {
		t.Fatalf("%d switches, want 2", len(sws))
	}
	if d := cmp.Diff(want, sws[0]); d != "" {
		t.Errorf("switch n1 (-want +got):\n%s", d)
	}
	if len(sws[1].Ports) != 2 {
		t.Errorf("switch n2 has %d ports, want its router and management ports", len(sws[1].Ports))
	}
}

func TestAnnotations(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"default":["10.244.1.0/24"]}`, "10.244.1.0/24"},
		{`{"default":"10.244.2.0/24"}`, "10.244.2.0/24"},
		{`{"default":["fd00::/64","10.244.3.7/24"]}`, "10.244.3.0/24"},
		{`{"default":[]}`, "error"},
		{`{"other":["10.1.0.0/24"]}`, "error"},
		{`not json`, "error"},
	} {
		p, err := NodeSubnet(tc.in)
		got := p.String()
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("NodeSubnet(%s) = %s (%v), want %s", tc.in, got, err, tc.want)
		}
	}
	a := PodNetworks(netip.MustParseAddr("10.244.1.5"), netip.MustParsePrefix("10.244.1.0/24"))
	want := `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","gateway_ips":["10.244.1.1"],` +
		`"ip_address":"10.244.1.5/24","gateway_ip":"10.244.1.1"}}`
	if a != want {
		t.Errorf("PodNetworks:\n got %s\nwant %s", a, want)
	}
	for in, want := range map[string]string{a: "10.244.1.5", "": "invalid IP", `{"default":{}}`: "invalid IP", "{": "invalid IP"} {
		if got := PodIP(in).String(); got != want {
			t.Errorf("PodIP(%q) = %s, want %s", in, got, want)
		}
	}
}

// Each node's pods reach the outside network through its management port,
// and only that network: one reroute policy per node and network, owned by
// this controller.
func TestEgressPolicies(t *testing.T) {
	got := EgressPolicies([]Node{{Name: "n2", Subnet: netip.MustParsePrefix("10.244.2.0/24")}, {Name: "n1", Subnet: netip.MustParsePrefix("10.244.1.0/24")}},
		[]netip.Prefix{netip.MustParsePrefix("10.89.0.7/24")})
	if len(got) != 2 || got[0].Match != "ip4.src == 10.244.1.0/24 && ip4.dst == 10.89.0.0/24" || got[0].Action != "reroute" ||
		len(got[0].Nexthops) != 1 || got[0].Nexthops[0] != "10.244.1.2" || got[1].Nexthops[0] != "10.244.2.2" || got[0].Priority != 1004 {
		t.Fatalf("policies %+v", got)
	}
	if got[0].ExternalIDs[keyOwnerController] != ControllerName || got[0].ExternalIDs[keyID] == got[1].ExternalIDs[keyID] {
		t.Errorf("ownership %v and %v: want this controller's, one id per node", got[0].ExternalIDs, got[1].ExternalIDs)
	}
	if got := EgressPolicies([]Node{{Name: "n1", Subnet: netip.MustParsePrefix("10.244.1.0/24")}}, nil); len(got) != 0 {
		t.Errorf("policies without an outside network: %+v", got)
	}
	// The route that lets the router take such packets at all, to the
	// first node by name.
	routes := EgressRoutes([]Node{{Name: "n2", Subnet: netip.MustParsePrefix("10.244.2.0/24")}, {Name: "n1", Subnet: netip.MustParsePrefix("10.244.1.0/24")}},
		[]netip.Prefix{netip.MustParsePrefix("10.89.0.7/24")})
	if len(routes) != 1 || routes[0].IPPrefix != "10.89.0.0/24" || routes[0].Nexthop != "10.244.1.2" {
		t.Errorf("routes %+v, want 10.89.0.0/24 via 10.244.1.2", routes)
	}
}
