package matrix

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func planPod(name, _, ip string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mx", Name: name, Labels: labels},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: ports}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}}
}

func TestMatrixPorts(t *testing.T) {
	tcp, udp, sctp := corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	web := planPod("web", "n", "10.244.1.2", map[string]string{"app": "web"},
		corev1.ContainerPort{Name: "http", ContainerPort: 8080},
		corev1.ContainerPort{Name: "dns", ContainerPort: 53, Protocol: udp},
		corev1.ContainerPort{Name: "sig", ContainerPort: 9, Protocol: sctp})
	db := planPod("db", "n", "10.244.1.3", map[string]string{"app": "db"})
	port := func(p intstr.IntOrString, proto *corev1.Protocol) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Port: &p, Protocol: proto}
	}
	policy := func(app string, ports ...networkingv1.NetworkPolicyPort) networkingv1.NetworkPolicy {
		return networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: ports}}}}
	}
	got := Ports([]corev1.Pod{*web, *db}, []networkingv1.NetworkPolicy{
		policy("web", port(intstr.FromString("http"), &tcp), port(intstr.FromInt32(443), nil)),
		policy("db", port(intstr.FromInt32(5432), &tcp), port(intstr.FromString("http"), &tcp), port(intstr.FromInt32(53), &udp)),
		policy("nobody", port(intstr.FromInt32(7), &tcp)),
	})
	want := []Port{
		{Protocol: traceflow.TCP, Number: 443}, {Protocol: traceflow.TCP, Number: 5432}, {Protocol: traceflow.TCP, Number: 8080},
		{Protocol: traceflow.UDP, Number: 53},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
}
