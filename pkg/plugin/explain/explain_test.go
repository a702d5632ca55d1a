package explain

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func TestPolicyExplainerNamesTheIsolatingPolicy(t *testing.T) {
	a := runningPod("default", "pod-a", "node-1", "10.244.1.5")
	b := runningPod("default", "pod-b", "node-2", "10.244.2.7")
	b.Labels = map[string]string{"app": "web"}
	objs := []runtime.Object{a, b,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "deny-web"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
	}
	res := &resolve.Result{
		Source:      resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "pod-a", IP: netip.MustParseAddr("10.244.1.5")},
		Destination: resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "pod-b", IP: netip.MustParseAddr("10.244.2.7")},
		Protocol:    traceflow.TCP, DstPort: 80,
	}
	explain := New(fake.NewClientset(objs...), res).ExplainDrop
	drop := report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "IngressDefaultRule", Action: report.ActionDropped}
	got := explain(context.Background(), nil, drop)
	if got.NetworkPolicy != "default/deny-web" || !strings.Contains(got.NetworkPolicyRule, "ingress default deny") ||
		!strings.Contains(got.NetworkPolicyRule, "TCP 80 from default/pod-a") {
		t.Fatalf("got %+v", got)
	}
	// OVN names the stage: ls_out_acl holds a pod's ingress ACLs,
	// ls_in_acl and ls_in_acl_after_lb its egress ACLs (none here).
	ovnIngress := report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "ls_out_acl (node-2)", Action: report.ActionDropped}
	if got := explain(context.Background(), nil, ovnIngress); got.NetworkPolicy != "default/deny-web" {
		t.Errorf("OVN's ls_out_acl drop: %+v", got)
	}
	ovnEgress := report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "ls_in_acl_after_lb (node-1)", Action: report.ActionDropped}
	if got := explain(context.Background(), nil, ovnEgress); got.NetworkPolicy != "" {
		t.Errorf("OVN's ls_in_acl_after_lb drop read as the destination's ingress: %+v", got)
	}
	// A drop elsewhere (routing) is left alone.
	routing := report.Observation{Component: report.ComponentRouting, Action: report.ActionDropped}
	if got := explain(context.Background(), []outcome.TimedHop{}, routing); got != routing {
		t.Fatalf("routing drop changed: %+v", got)
	}
}

// The traces of a run share what their Explainers read for ReadsMaxAge:
// a second trace's drop is named without an API call, with the same
// answer; a trace after that reads again.
func TestExplainersShareTheirReads(t *testing.T) {
	a := runningPod("default", "pod-a", "node-1", "10.244.1.5")
	b := runningPod("default", "pod-b", "node-2", "10.244.2.7")
	cs := fake.NewClientset(a, b, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "deny-all"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}})
	res := &resolve.Result{
		Source:      resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "pod-a", IP: netip.MustParseAddr("10.244.1.5")},
		Destination: resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "pod-b", IP: netip.MustParseAddr("10.244.2.7")},
		Protocol:    traceflow.TCP, DstPort: 80,
	}
	drop := report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "IngressDefaultRule", Action: report.ActionDropped}
	now := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	reads := NewReads()
	reads.Now = func() time.Time { return now }
	trace := func() (report.Observation, int) {
		cs.ClearActions()
		got := New(cs, res).Sharing(reads).ExplainDrop(context.Background(), nil, drop)
		return got, len(cs.Actions())
	}
	first, n1 := trace()
	second, n2 := trace()
	if first.NetworkPolicy != "default/deny-all" || second != first {
		t.Fatalf("first %+v, second %+v: want deny-all both times", first, second)
	}
	if n1 == 0 || n2 != 0 {
		t.Errorf("%d API calls for the first trace, %d for the second; want some, then none", n1, n2)
	}
	now = now.Add(ReadsMaxAge)
	if _, n3 := trace(); n3 != n1 {
		t.Errorf("%d API calls after %s, want %d again", n3, ReadsMaxAge, n1)
	}
	cs.ClearActions()
	New(cs, res).ExplainDrop(context.Background(), nil, drop)
	// Without: the namespace is read again for the second pod.
	if n := len(cs.Actions()); n != n1+1 {
		t.Errorf("without shared reads a trace made %d API calls, want %d", n, n1+1)
	}
}

func runningPod(ns, name, node, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}
