package ovnk

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"router port", RouterToSwitch("lab-node1"), "rtos-lab-node1"},
		{"switch port", SwitchToRouter("lab-node1"), "stor-lab-node1"},
		{"management port", ManagementPort("lab-node1"), "k8s-lab-node1"},
		{"pod port", PodPort("demo", "pod-a"), "demo_pod-a"},
		{"MAC of a pod", MAC(netip.MustParseAddr("10.244.1.5")), "0a:58:0a:f4:01:05"},
		{"MAC of a gateway", MAC(netip.MustParseAddr("10.244.2.1")), "0a:58:0a:f4:02:01"},
		{"LB name", LBName("demo", "web", "TCP", "cluster"), "Service_demo/web_TCP_cluster"},
		// FNV-1a 64 in decimal; expected values from an independent Python implementation.
		{"hash of nothing", HashForOVN(""), "a14695981039346656037"},
		{"cluster port group", HashForOVN("default-network-controller:Cluster:clusterPortGroup"), "a13298398610555951118"},
		{"deny group", newIDs(ownerNetpolNS, keyName, "demo", "direction", "Ingress").hashName(), "a9578480312565175245"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestDBIDs(t *testing.T) {
	ids := newIDs(ownerNetworkPolicy, keyName, "demo:web", "direction", "Ingress", "gress-index", "0",
		"port-policy-protocol", "tcp", "ip-block-index", "-1")
	want := map[string]string{
		"k8s.ovn.org/owner-controller": "default-network-controller",
		"k8s.ovn.org/owner-type":       "NetworkPolicy",
		"k8s.ovn.org/name":             "demo:web",
		"k8s.ovn.org/id":               "default-network-controller:NetworkPolicy:demo:web:Ingress:0:tcp:-1",
		"direction":                    "Ingress",
		"gress-index":                  "0",
		"port-policy-protocol":         "tcp",
		"ip-block-index":               "-1",
	}
	if d := cmp.Diff(want, ids.externalIDs()); d != "" {
		t.Errorf("external_ids (-want +got):\n%s", d)
	}
}
