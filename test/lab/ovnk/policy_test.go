package ovnk

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// aclLine renders an ACL as ovn-nbctl acl-list does, plus its name and options.
func aclLine(a ACL) string {
	s := fmt.Sprintf("%s %d (%s) %s [%s]", a.Direction, a.Priority, a.Match, a.Action, deref(a.Name))
	if len(a.Options) > 0 {
		s += fmt.Sprint(" ", a.Options)
	}
	return s
}

// pgACLs renders the port groups a translation builds, their hashed names
// replaced by the key they hash, so that the expectations can be read.
func pgACLs(pgs []PortGroupState, sets []AddressSet) []string {
	var out []string
	names := map[string]string{}
	for _, pg := range pgs {
		names[pg.Group.Name] = "PG(" + pg.Group.ExternalIDs[keyOwnerType] + ":" + pg.Group.ExternalIDs[keyName] + ":" + pg.Group.ExternalIDs["direction"] + ")"
	}
	for _, as := range sets {
		names["$"+as.Name] = "$AS(" + as.ExternalIDs[keyName] + ")=" + strings.Join(as.Addresses, ",")
	}
	for _, pg := range pgs {
		out = append(out, names[pg.Group.Name]+" ports "+strings.Join(pg.PortNames, ","))
		for _, a := range pg.ACLs {
			line := aclLine(a)
			for hashed, readable := range names {
				line = strings.ReplaceAll(line, "@"+hashed, "@"+readable)
				line = strings.ReplaceAll(line, hashed, readable)
			}
			out = append(out, "  "+line)
		}
	}
	return out
}

func TestPolicies(t *testing.T) {
	c := Cluster{
		Pods: []Pod{
			{Namespace: "demo", Name: "a", Labels: map[string]string{"app": "a"}, IP: netip.MustParseAddr("10.244.1.3")},
			{Namespace: "demo", Name: "web", Labels: map[string]string{"app": "web"}, IP: netip.MustParseAddr("10.244.2.3")},
			{Namespace: "other", Name: "c", Labels: map[string]string{"app": "a"}, IP: netip.MustParseAddr("10.244.1.4")},
		},
		Namespaces: map[string]map[string]string{"demo": {"team": "x"}, "other": {"team": "y"}},
	}
	web := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	appA := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}
	teamY := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "y"}}
	port := func(proto corev1.Protocol, p int32, end ...int32) networkingv1.NetworkPolicyPort {
		np := networkingv1.NetworkPolicyPort{Protocol: ptr.To(proto), Port: ptr.To(intstr.FromInt32(p))}
		if len(end) > 0 {
			np.EndPort = ptr.To(end[0])
		}
		return np
	}
	policy := func(name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name}, Spec: spec}
	}
	denyIngress := []string{
		"PG(NetpolNamespace:demo:Ingress) ports demo_web",
		"  to-lport 1000 (outport == @PG(NetpolNamespace:demo:Ingress)) drop [NP:demo:Ingress]",
		"  to-lport 1001 (outport == @PG(NetpolNamespace:demo:Ingress) && (arp || nd)) allow [NP:demo:Ingress]",
	}
	denyEgressEmpty := []string{
		"PG(NetpolNamespace:demo:Egress) ports ",
		"  from-lport 1000 (inport == @PG(NetpolNamespace:demo:Egress)) drop [NP:demo:Egress] map[apply-after-lb:true]",
		"  from-lport 1001 (inport == @PG(NetpolNamespace:demo:Egress) && (arp || nd)) allow [NP:demo:Egress] map[apply-after-lb:true]",
	}
	for _, tc := range []struct {
		name string
		nps  []*networkingv1.NetworkPolicy
		want []string
	}{
		{"deny all ingress: a group, no allow ACL, the namespace's default deny",
			[]*networkingv1.NetworkPolicy{policy("deny", networkingv1.NetworkPolicySpec{PodSelector: web})},
			append([]string{"PG(NetworkPolicy:demo:deny:) ports demo_web"}, append(denyIngress, denyEgressEmpty...)...)},
		{"pod selector peer on one TCP port, namespace selector peer on any port",
			[]*networkingv1.NetworkPolicy{policy("web-in", networkingv1.NetworkPolicySpec{PodSelector: web,
				Ingress: []networkingv1.NetworkPolicyIngressRule{
					{From: []networkingv1.NetworkPolicyPeer{{PodSelector: appA}}, Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 80)}},
					{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: teamY}}},
				}})},
			append([]string{
				"PG(NetworkPolicy:demo:web-in:) ports demo_web",
				"  to-lport 1001 (ip4.src == {$AS(demo_LS{ML:{app: a,},})=10.244.1.3} && tcp && tcp.dst==80 && outport == @PG(NetworkPolicy:demo:web-in:)) allow-related [NP:demo:web-in:Ingress:0]",
				"  to-lport 1001 (ip4.src == {$AS(LS{ML:{team: y,},}_LS{}_LNM)=10.244.1.4} && outport == @PG(NetworkPolicy:demo:web-in:)) allow-related [NP:demo:web-in:Ingress:1]",
			}, append(denyIngress, denyEgressEmpty...)...)},
		{"ipBlock with except, and a selector, on TCP and UDP ports and a range",
			[]*networkingv1.NetworkPolicy{policy("mixed", networkingv1.NetworkPolicySpec{PodSelector: web,
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{
						{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.244.1.0/24", "10.244.3.0/24"}}},
						{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16"}},
						{PodSelector: appA, NamespaceSelector: teamY},
					},
					Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 80), port(corev1.ProtocolTCP, 8080),
						port(corev1.ProtocolUDP, 5000, 5010)},
				}}})},
			append([]string{
				"PG(NetworkPolicy:demo:mixed:) ports demo_web",
				"  to-lport 1001 (((ip4.src == 10.0.0.0/8 && ip4.src != {10.244.1.0/24, 10.244.3.0/24}) || ip4.src == 192.168.0.0/16) && tcp && tcp.dst=={80,8080} && outport == @PG(NetworkPolicy:demo:mixed:)) allow-related [NP:demo:mixed:Ingress:0]",
				"  to-lport 1001 (ip4.src == {$AS(LS{ML:{team: y,},}_LS{ML:{app: a,},})=10.244.1.4} && tcp && tcp.dst=={80,8080} && outport == @PG(NetworkPolicy:demo:mixed:)) allow-related [NP:demo:mixed:Ingress:0]",
				"  to-lport 1001 (((ip4.src == 10.0.0.0/8 && ip4.src != {10.244.1.0/24, 10.244.3.0/24}) || ip4.src == 192.168.0.0/16) && udp && 5000<=udp.dst<=5010 && outport == @PG(NetworkPolicy:demo:mixed:)) allow-related [NP:demo:mixed:Ingress:0]",
				"  to-lport 1001 (ip4.src == {$AS(LS{ML:{team: y,},}_LS{ML:{app: a,},})=10.244.1.4} && udp && 5000<=udp.dst<=5010 && outport == @PG(NetworkPolicy:demo:mixed:)) allow-related [NP:demo:mixed:Ingress:0]",
			}, append(denyIngress, denyEgressEmpty...)...)},
		{"egress to any address on UDP 53: from-lport after load balancing; ingress untouched",
			[]*networkingv1.NetworkPolicy{policy("a-out", networkingv1.NetworkPolicySpec{PodSelector: *appA,
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, 53)}}},
			})},
			[]string{
				"PG(NetworkPolicy:demo:a-out:) ports demo_a",
				"  from-lport 1001 (ip4 && udp && udp.dst==53 && inport == @PG(NetworkPolicy:demo:a-out:)) allow-related [NP:demo:a-out:Egress:0] map[apply-after-lb:true]",
				"PG(NetpolNamespace:demo:Ingress) ports ",
				"  to-lport 1000 (outport == @PG(NetpolNamespace:demo:Ingress)) drop [NP:demo:Ingress]",
				"  to-lport 1001 (outport == @PG(NetpolNamespace:demo:Ingress) && (arp || nd)) allow [NP:demo:Ingress]",
				"PG(NetpolNamespace:demo:Egress) ports demo_a",
				"  from-lport 1000 (inport == @PG(NetpolNamespace:demo:Egress)) drop [NP:demo:Egress] map[apply-after-lb:true]",
				"  from-lport 1001 (inport == @PG(NetpolNamespace:demo:Egress) && (arp || nd)) allow [NP:demo:Egress] map[apply-after-lb:true]",
			}},
		{"only named ports: the rule allows nothing",
			[]*networkingv1.NetworkPolicy{policy("named", networkingv1.NetworkPolicySpec{PodSelector: web,
				Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
					{Port: ptr.To(intstr.FromString("http"))}}}}})},
			append([]string{"PG(NetworkPolicy:demo:named:) ports demo_web"}, append(denyIngress, denyEgressEmpty...)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, pgACLs(Policies(c, tc.nps))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestPolicyACLIDs(t *testing.T) {
	pgs, _ := Policies(Cluster{Namespaces: map[string]map[string]string{}}, []*networkingv1.NetworkPolicy{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "p"},
		Spec:       networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
	}})
	got := map[string]string{}
	for _, pg := range pgs {
		for _, a := range pg.ACLs {
			got[deref(a.Name)+"/"+a.Action] = a.ExternalIDs[keyID]
		}
	}
	want := map[string]string{
		"NP:demo:p:Ingress:0/allow-related": "default-network-controller:NetworkPolicy:demo:p:Ingress:0:None:-1",
		"NP:demo:Ingress/drop":              "default-network-controller:NetpolNamespace:demo:Ingress:defaultDeny",
		"NP:demo:Ingress/allow":             "default-network-controller:NetpolNamespace:demo:Ingress:arpAllow",
		"NP:demo:Egress/drop":               "default-network-controller:NetpolNamespace:demo:Egress:defaultDeny",
		"NP:demo:Egress/allow":              "default-network-controller:NetpolNamespace:demo:Egress:arpAllow",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ACL ids (-want +got):\n%s", d)
	}
}

func TestClusterPortGroup(t *testing.T) {
	pg := ClusterPortGroup([]string{"n2", "n1"}, HairpinSNATIP)
	want := []string{
		"PG(Cluster:clusterPortGroup:) ports k8s-n1,k8s-n2",
		"  to-lport 1001 (ip4.src == 169.254.169.5) allow-related []",
		"  from-lport 1001 (ip4.src == 169.254.169.5) allow-related [] map[apply-after-lb:true]",
	}
	if d := cmp.Diff(want, pgACLs([]PortGroupState{pg}, nil)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if pg.Group.Name != "a13298398610555951118" {
		t.Errorf("name %s, want the hash of default-network-controller:Cluster:clusterPortGroup", pg.Group.Name)
	}
	if acls := ClusterPortGroup([]string{"n1"}, "").ACLs; len(acls) != 0 {
		t.Errorf("without a hairpin SNAT IP: %d ACLs, want none", len(acls))
	}
}
