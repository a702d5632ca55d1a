//go:build integration

package ovnk

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Apply writes nothing the second time, repairs what a hand edit broke and
// leaves rows it does not own alone.
func TestIntegrationApplyConverges(t *testing.T) {
	c := startCentral(t)
	nb := c.connect(t)
	ctx := context.Background()
	in := Input{
		Nodes: []Node{{Name: "n1", Subnet: netip.MustParsePrefix("10.244.1.0/24")}},
		Pods:  []Pod{{Namespace: "demo", Name: "a", Node: "n1", IP: netip.MustParseAddr("10.244.1.3")}},
		Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}}}},
		Slices:        map[string][]*discoveryv1.EndpointSlice{},
		Policies:      []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "deny"}}},
		Namespaces:    map[string]map[string]string{"demo": nil},
		HairpinSNATIP: HairpinSNATIP,
		Outside:       []netip.Prefix{netip.MustParsePrefix("10.89.0.0/24")},
	}
	apply := func(what string) int {
		t.Helper()
		n, err := Apply(ctx, nb, Build(in))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return n
	}
	if n := apply("first"); n == 0 {
		t.Fatal("first Apply wrote nothing")
	}
	if n := apply("second"); n != 0 {
		t.Errorf("second Apply took %d operations, want 0", n)
	}
	// The node's egress reroute (local gateway mode), beside a policy of
	// someone else's.
	nbHas(t, c, "ip4.src == 10.244.1.0/24 && ip4.dst == 10.89.0.0/24 reroute 10.244.1.2", "lr-policy-list", ClusterRouter)
	nbHas(t, c, "10.89.0.0/24 10.244.1.2 dst-ip", "lr-route-list", ClusterRouter)
	c.nbctl(t, "lr-policy-add", ClusterRouter, "10", "ip4.dst == 192.0.2.0/24", "drop")
	c.nbctl(t, "lr-route-add", ClusterRouter, "192.0.2.0/24", "10.244.1.9")
	// Not ours: a switch without a subnet, a load balancer of another kind.
	c.nbctl(t, "ls-add", "join")
	c.nbctl(t, "lb-add", "foreign", "10.1.1.1:1", "10.2.2.2:2", "tcp")
	// Hand edits: an ACL and a port deleted, a load balancer detached.
	drop := c.nbctl(t, "--bare", "--columns=_uuid", "find", "ACL", "action=drop", "direction=to-lport")
	pg := c.nbctl(t, "--bare", "--columns=name", "find", "Port_Group", "external_ids:k8s.ovn.org/owner-type=NetpolNamespace", "external_ids:direction=Ingress")
	c.nbctl(t, "remove", "Port_Group", pg, "acls", drop)
	c.nbctl(t, "lsp-del", "demo_a")
	c.nbctl(t, "ls-lb-del", "n1")
	if n := apply("repair"); n == 0 {
		t.Error("Apply after hand edits wrote nothing")
	}
	nbHas(t, c, "drop", "--bare", "--columns=action", "find", "ACL", "direction=to-lport", "priority=1000")
	nbHas(t, c, "demo_a", "lsp-list", "n1")
	nbHas(t, c, "Service_demo/web tcp", "ls-lb-list", "n1")
	nbHas(t, c, "join", "ls-list")
	nbHas(t, c, "foreign", "lb-list")
	if n := apply("after repair"); n != 0 {
		t.Errorf("Apply after the repair took %d operations, want 0", n)
	}
	// Everything gone: only what is not ours is left.
	if _, err := Apply(ctx, nb, Desired{}); err != nil {
		t.Fatal(err)
	}
	if out := c.nbctl(t, "ls-list"); strings.Contains(out, "n1") || !strings.Contains(out, "join") {
		t.Errorf("switches after removing everything: %s", out)
	}
	for _, table := range []string{"Port_Group", "ACL", "Address_Set", "Logical_Switch_Port", "Logical_Router_Port"} {
		if out := c.nbctl(t, "--bare", "--columns=_uuid", "list", table); out != "" {
			t.Errorf("%s rows left: %s", table, out)
		}
	}
	if out := c.nbctl(t, "lb-list"); strings.Contains(out, "Service_") || !strings.Contains(out, "foreign") {
		t.Errorf("load balancers after removing everything: %s", out)
	}
	if out := c.nbctl(t, "lr-policy-list", ClusterRouter); strings.Contains(out, "reroute") || !strings.Contains(out, "192.0.2.0/24") {
		t.Errorf("policies after removing everything: %s", out)
	}
	if out := c.nbctl(t, "lr-route-list", ClusterRouter); strings.Contains(out, "10.89.0.0/24") || !strings.Contains(out, "192.0.2.0/24") {
		t.Errorf("routes after removing everything: %s", out)
	}
}
