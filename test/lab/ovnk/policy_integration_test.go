//go:build integration

package ovnk

import (
	"context"
	"regexp"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The policies of the issue: web takes TCP 80 from pods labelled app=a
// (and anything from namespaces labelled team=y and from 10/8 but a's
// subnet); a may send to TCP 80 and 81 only.
func TestIntegrationNetworkPolicies(t *testing.T) {
	c := startCentral(t)
	cs := fake.NewClientset(node("n1", "10.244.1.0/24"), node("n2", "10.244.2.0/24"),
		namespace("demo", map[string]string{"team": "x"}), namespace("other", map[string]string{"team": "y"}),
		pod("demo", "a", "n1", map[string]string{"app": "a"}), pod("demo", "web", "n2", map[string]string{"app": "web"}),
		pod("other", "c", "n1", nil))
	runController(t, cs, c)
	podIP(t, cs, "demo", "a")
	podIP(t, cs, "demo", "web")
	podIP(t, cs, "other", "c")
	ctx := context.Background()
	ingress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-in"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}},
					Ports: []networkingv1.NetworkPolicyPort{tcpPort(80)}},
				{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "y"}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.244.1.0/24"}}}}},
			},
		}}
	egress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "a-out"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{tcpPort(80), tcpPort(81)}}},
		}}
	for _, np := range []*networkingv1.NetworkPolicy{ingress, egress} {
		if _, err := cs.NetworkingV1().NetworkPolicies("demo").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	acls := []string{"--bare", "--columns=name,priority,direction,action,match,options,external_ids", "find", "ACL"}
	// The allow rule of web-in, gress 0, as OVN-Kubernetes names it.
	nbHas(t, c, "NP:demo:web-in:Ingress:0 1001 to-lport allow-related ip4.src == {$a", append(acls, `external_ids:k8s.ovn.org/name="demo:web-in"`)...)
	nbHas(t, c, "&& tcp && tcp.dst==80 && outport == @a", append(acls, `external_ids:k8s.ovn.org/name="demo:web-in"`)...)
	nbHas(t, c, "(ip4.src == 10.0.0.0/8 && ip4.src != {10.244.1.0/24}) && outport == @a", append(acls, `external_ids:k8s.ovn.org/name="demo:web-in"`)...)
	for _, kv := range []string{"k8s.ovn.org/owner-type=NetworkPolicy", "k8s.ovn.org/owner-controller=default-network-controller",
		"direction=Ingress", "gress-index=1", "ip-block-index=-2", "port-policy-protocol=None", "k8s.ovn.org/id=default-network-controller:NetworkPolicy:demo:web-in:Ingress:1:None:-2"} {
		nbHas(t, c, kv, append(acls, `external_ids:k8s.ovn.org/name="demo:web-in"`)...)
	}
	nbHas(t, c, "NP:demo:a-out:Egress:0 1001 from-lport allow-related ip4 && tcp && tcp.dst=={80,81} && inport == @a", append(acls, `external_ids:k8s.ovn.org/name="demo:a-out"`)...)
	nbHas(t, c, "apply-after-lb=true", append(acls, `external_ids:k8s.ovn.org/name="demo:a-out"`)...)
	// Default deny of the namespace, per direction, and the ARP/ND allow above it.
	nbHas(t, c, "NP:demo:Ingress 1000 to-lport drop outport == @a", append(acls, `external_ids:type=defaultDeny`, `external_ids:direction=Ingress`)...)
	nbHas(t, c, "NP:demo:Egress 1000 from-lport drop inport == @a", append(acls, `external_ids:type=defaultDeny`, `external_ids:direction=Egress`)...)
	nbHas(t, c, "NP:demo:Ingress 1001 to-lport allow outport == @a", append(acls, `external_ids:type=arpAllow`, `external_ids:direction=Ingress`)...)
	nbHas(t, c, "&& (arp || nd)", append(acls, `external_ids:type=arpAllow`)...)
	// Port groups: the policy's selected pods, the namespace's deny groups.
	pgs := []string{"--bare", "--columns=name,ports", "find", "Port_Group"}
	webPort := c.nbctl(t, "--bare", "--columns=_uuid", "list", "Logical_Switch_Port", "demo_web")
	nbHas(t, c, webPort, append(pgs, `external_ids:k8s.ovn.org/name="demo:web-in"`)...)
	nbHas(t, c, webPort, append(pgs, `external_ids:k8s.ovn.org/owner-type=NetpolNamespace`, `external_ids:direction=Ingress`)...)
	// The peer address set holds a's address.
	nbHas(t, c, "10.244.1.3", "--bare", "--columns=addresses", "find", "Address_Set", `external_ids:k8s.ovn.org/name="demo_LS{ML:{app: a,},}"`)
	nbHas(t, c, "10.244.1.4", "--bare", "--columns=addresses", "find", "Address_Set", `external_ids:k8s.ovn.org/name="LS{ML:{team: y,},}_LS{}_LNM"`)

	// The dataplane as northd compiles it: a to web on 80 passes, on 81 the
	// default deny drops it in web's switch's egress pipeline (to-lport).
	flow := func(port string) string {
		return `inport == "demo_a" && eth.src == 0a:58:0a:f4:01:03 && eth.dst == 0a:58:0a:f4:01:01 && ip4.src == 10.244.1.3 && ` +
			`ip4.dst == 10.244.2.3 && ip.ttl == 64 && tcp && tcp.dst == ` + port
	}
	if out := c.trace(t, "n1", flow("80")); strings.Contains(out, "drop;") || !strings.Contains(out, `output to "demo_web"`) {
		t.Errorf("a -> web:80 is dropped:\n%s", out)
	}
	if out := c.trace(t, "n1", flow("81")); !regexp.MustCompile(`ls_out_acl .*outport == @a\d+.*\n *drop;`).MatchString(out) {
		t.Errorf("a -> web:81 is not dropped by web's ingress default deny in ls_out_acl:\n%s", out)
	}
	// a's egress default deny drops what is not TCP 80 or 81, after load balancing.
	if out := c.trace(t, "n1", flow("8080")); !regexp.MustCompile(`ls_in_acl_after_lb .*inport == @a\d+.*\n *drop;`).MatchString(out) {
		t.Errorf("a -> web:8080 is not dropped by a's egress default deny in ls_in_acl_after_lb:\n%s", out)
	}

	// What ovn-detrace does with a drop: the logical flow's stage-hint is the
	// first 32 bits of the ACL's NB UUID, whose external_ids name its owner
	// (for a default deny, the namespace; the policies are the port groups
	// holding the dropped port).
	deny := c.nbctl(t, "--bare", "--columns=_uuid", "find", "ACL", "external_ids:type=defaultDeny", "external_ids:direction=Ingress")
	flows := c.sbctl(t, "--bare", "--columns=external_ids,actions", "find", "Logical_Flow", "external_ids:stage-hint="+deny[:8])
	if !regexp.MustCompile(`stage-name=ls_out_acl\s+/\* drop \*/`).MatchString(flows) {
		t.Errorf("no ls_out_acl drop flow has stage-hint %s (ACL %s):\n%s", deny[:8], deny, flows)
	}
	nbHas(t, c, "k8s.ovn.org/name=demo k8s.ovn.org/owner-controller=default-network-controller k8s.ovn.org/owner-type=NetpolNamespace",
		"--bare", "--columns=external_ids", "list", "ACL", deny)

	// Deleting both policies removes every row they made.
	for _, n := range []string{"web-in", "a-out"} {
		if err := cs.NetworkingV1().NetworkPolicies("demo").Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nbLacks(t, c, "NetworkPolicy", "--bare", "--columns=external_ids", "list", "ACL")
	nbLacks(t, c, "NetpolNamespace", "--bare", "--columns=external_ids", "list", "ACL")
	nbLacks(t, c, "NetworkPolicy", "--bare", "--columns=external_ids", "list", "Port_Group")
	nbLacks(t, c, "NetpolNamespace", "--bare", "--columns=external_ids", "list", "Port_Group")
	nbLacks(t, c, "PodSelector", "--bare", "--columns=external_ids", "list", "Address_Set")
	for _, port := range []string{"81", "8080"} {
		if out := c.trace(t, "n1", flow(port)); strings.Contains(out, "drop;") || !strings.Contains(out, `output to "demo_web"`) {
			t.Errorf("a -> web:%s not delivered after the policies went:\n%s", port, out)
		}
	}
}
