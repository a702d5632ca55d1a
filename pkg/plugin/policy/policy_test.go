package policy

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func pod(ns, name string, l map[string]string, ip string) Endpoint {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
	return Endpoint{Pod: p, NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": ns}, IP: netip.MustParseAddr(ip)}
}

func np(name string, sel map[string]string, types []networkingv1.PolicyType, ingress []networkingv1.NetworkPolicyIngressRule, egress []networkingv1.NetworkPolicyEgressRule) networkingv1.NetworkPolicy {
	return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}, PolicyTypes: types, Ingress: ingress, Egress: egress}}
}

var (
	client = pod("demo", "a", map[string]string{"app": "client"}, "10.244.1.5")
	web    = pod("demo", "b", map[string]string{"app": "web"}, "10.244.2.7")
	other  = pod("prod", "x", map[string]string{"app": "client"}, "10.244.2.9")
	tcp80  = Probe{Protocol: corev1.ProtocolTCP, Port: 80}
	ingr   = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egr    = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
)

func port(p int32) []networkingv1.NetworkPolicyPort {
	return []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(p))}}
}

func fromClients(ports []networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}}, Ports: ports}}
}

func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policies []networkingv1.NetworkPolicy
		dir      Direction
		src, dst Endpoint
		probe    Probe
		want     []string
	}{
		{"default deny names the policy", []networkingv1.NetworkPolicy{np("deny-web", map[string]string{"app": "web"}, ingr, nil, nil)}, Ingress, client, web, tcp80, []string{"demo/deny-web"}},
		{"a rule allows: not explained", []networkingv1.NetworkPolicy{np("allow", map[string]string{"app": "web"}, ingr, fromClients(port(80)), nil)}, Ingress, client, web, tcp80, nil},
		{"rule on another port", []networkingv1.NetworkPolicy{np("allow-443", map[string]string{"app": "web"}, ingr, fromClients(port(443)), nil)}, Ingress, client, web, tcp80, []string{"demo/allow-443"}},
		{"named port resolved on the target", []networkingv1.NetworkPolicy{np("allow-http", map[string]string{"app": "web"}, ingr,
			fromClients([]networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromString("http"))}}), nil)}, Ingress, client, web, Probe{Protocol: corev1.ProtocolTCP, Port: 8080}, nil},
		{"pod selector alone means same namespace", []networkingv1.NetworkPolicy{np("allow", map[string]string{"app": "web"}, ingr, fromClients(nil), nil)}, Ingress, other, web, tcp80, []string{"demo/allow"}},
		{"namespace selector lets another namespace in", []networkingv1.NetworkPolicy{np("allow-prod", map[string]string{"app": "web"}, ingr,
			[]networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "prod"}}}}}}, nil)},
			Ingress, other, web, tcp80, nil},
		{"ipBlock with except", []networkingv1.NetworkPolicy{np("cidr", map[string]string{"app": "web"}, ingr,
			[]networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.0.0/16", Except: []string{"10.244.1.0/24"}}}}}}, nil)},
			Ingress, client, web, tcp80, []string{"demo/cidr"}},
		{"ICMP never matches a rule with ports", []networkingv1.NetworkPolicy{np("tcp-only", map[string]string{"app": "web"}, ingr, fromClients(port(80)), nil)}, Ingress, client, web, Probe{}, []string{"demo/tcp-only"}},
		{"policy for other pods", []networkingv1.NetworkPolicy{np("deny-db", map[string]string{"app": "db"}, ingr, nil, nil)}, Ingress, client, web, tcp80, nil},
		{"egress default deny on the source", []networkingv1.NetworkPolicy{np("no-egress", map[string]string{"app": "client"}, egr, nil, nil)}, Egress, client, web, tcp80, []string{"demo/no-egress"}},
		{"egress-only policy does not isolate ingress", []networkingv1.NetworkPolicy{np("no-egress", map[string]string{"app": "web"}, egr, nil, nil)}, Ingress, client, web, tcp80, nil},
		{"two isolating policies, both named", []networkingv1.NetworkPolicy{
			np("b-deny", map[string]string{"app": "web"}, ingr, nil, nil), np("a-deny", map[string]string{}, ingr, nil, nil)}, Ingress, client, web, tcp80, []string{"demo/a-deny", "demo/b-deny"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Explain(tc.policies, tc.dir, tc.src, tc.dst, tc.probe)
			if (tc.want != nil) != ok {
				t.Fatalf("ok=%v (%+v), want %v", ok, got, tc.want != nil)
			}
			if ok && (len(got.Policies) != len(tc.want) || got.Policies[0] != tc.want[0] || got.Rule == "") {
				t.Errorf("got %+v, want %v", got, tc.want)
			}
		})
	}
}

// The reason says what each rule of an isolating policy allows that the
// probe is not: a near miss reads as one.
func TestExplainSaysWhatEachRuleMisses(t *testing.T) {
	nsRule := []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "prod"}}}}}}
	cidr := []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.0.0/16", Except: []string{"10.244.1.0/24"}}}}}}
	udp := corev1.ProtocolUDP
	for _, tc := range []struct {
		name   string
		policy networkingv1.NetworkPolicy
		dir    Direction
		want   string
	}{
		{"isolation alone", np("deny-web", map[string]string{"app": "web"}, ingr, nil, nil), Ingress,
			"ingress default deny: no ingress rule allows TCP 80 from demo/a"},
		{"another port", np("allow-443", map[string]string{"app": "web"}, ingr, fromClients(port(443)), nil), Ingress,
			"ingress default deny: no ingress rule allows TCP 80 from demo/a (allow-443 rule 1 allows only TCP 443)"},
		{"another namespace", np("from-prod", map[string]string{"app": "web"}, ingr, nsRule, nil), Ingress,
			"ingress default deny: no ingress rule allows TCP 80 from demo/a (from-prod rule 1 allows only from namespaces kubernetes.io/metadata.name=prod)"},
		{"an except", np("cidr", map[string]string{"app": "web"}, ingr, cidr, nil), Ingress,
			"ingress default deny: no ingress rule allows TCP 80 from demo/a (cidr rule 1 allows only from 10.244.0.0/16 except 10.244.1.0/24)"},
		{"two rules, each missing", np("two", map[string]string{"app": "web"}, ingr, append(fromClients([]networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: ptr.To(intstr.FromInt32(53))}}), nsRule...), nil), Ingress,
			"ingress default deny: no ingress rule allows TCP 80 from demo/a (two rule 1 allows only UDP 53; two rule 2 allows only from namespaces kubernetes.io/metadata.name=prod)"},
		{"egress to other pods on another port", np("egress-db", map[string]string{"app": "client"}, egr, nil, []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}, Ports: port(5432)}}), Egress,
			"egress default deny: no egress rule allows TCP 80 to demo/b (egress-db rule 1 allows only TCP 5432 to pods app=db in demo)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Explain([]networkingv1.NetworkPolicy{tc.policy}, tc.dir, client, web, tcp80)
			if !ok || got.Rule != tc.want {
				t.Errorf("got %q (ok %v)\nwant %q", got.Rule, ok, tc.want)
			}
		})
	}
}
