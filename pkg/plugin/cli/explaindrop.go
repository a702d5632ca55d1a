package cli

import (
	"context"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/policy"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// explainDropBudget bounds the lookups that name a policy: the verdict must
// not wait long for a nicety.
const explainDropBudget = 2 * time.Second

// policyExplainer names the Kubernetes NetworkPolicies behind a drop in a
// policy table, by evaluating them against the probe (package policy). Any
// lookup that fails (RBAC, a pod gone) leaves the observation unnamed.
func policyExplainer(cs kubernetes.Interface, res *resolve.Result) func(context.Context, []outcome.TimedHop, report.Observation) report.Observation {
	return func(ctx context.Context, hops []outcome.TimedHop, o report.Observation) report.Observation {
		if o.Component != report.ComponentNetworkPolicy {
			return o
		}
		ctx, cancel := context.WithTimeout(ctx, explainDropBudget)
		defer cancel()
		dir := policy.Ingress
		// Antrea's egress tables say Egress; OVN applies a pod's egress
		// (from-lport) ACLs in a switch's ingress pipeline (ls_in_acl,
		// ls_in_acl_after_lb) and its ingress (to-lport) ACLs in the egress
		// pipeline (ls_out_acl).
		if strings.Contains(o.ComponentInfo, "Egress") || strings.HasPrefix(o.ComponentInfo, "ls_in_") {
			dir = policy.Egress
		}
		src, ok := endpointByName(ctx, cs, res.Source.Namespace, res.Source.Name, res.Source.IP)
		if !ok {
			return o
		}
		// The packet's real destination: the endpoint a Service chose, if
		// any hop translated it, else the destination itself.
		dstIP := res.Destination.IP
		for _, h := range hops {
			if ip, err := netip.ParseAddr(h.Observation.TranslatedDstIP); err == nil {
				dstIP = ip
			}
		}
		var dst policy.Endpoint
		if res.Destination.Kind == resolve.KindPod {
			dst, ok = endpointByName(ctx, cs, res.Destination.Namespace, res.Destination.Name, dstIP)
		} else {
			dst, ok = endpointByIP(ctx, cs, dstIP)
		}
		if !ok {
			return o
		}
		target := dst
		if dir == policy.Egress {
			target = src
		}
		if target.Pod == nil {
			return o
		}
		list, err := cs.NetworkingV1().NetworkPolicies(target.Pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return o
		}
		e, ok := policy.Explain(list.Items, dir, src, dst, probeOf(res))
		if !ok {
			return o
		}
		o.NetworkPolicy = strings.Join(e.Policies, ", ")
		o.NetworkPolicyRule = e.Rule
		return o
	}
}

func probeOf(res *resolve.Result) policy.Probe {
	switch res.Protocol {
	case traceflow.TCP:
		return policy.Probe{Protocol: corev1.ProtocolTCP, Port: res.DstPort}
	case traceflow.UDP:
		return policy.Probe{Protocol: corev1.ProtocolUDP, Port: res.DstPort}
	}
	return policy.Probe{}
}

func endpointByName(ctx context.Context, cs kubernetes.Interface, ns, name string, ip netip.Addr) (policy.Endpoint, bool) {
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return policy.Endpoint{}, false
	}
	return withNamespace(ctx, cs, p, ip)
}

// endpointByIP finds the pod with ip; an IP no pod has is an outside peer.
func endpointByIP(ctx context.Context, cs kubernetes.Interface, ip netip.Addr) (policy.Endpoint, bool) {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("status.podIP", ip.String()).String(),
	})
	if err != nil {
		return policy.Endpoint{}, false
	}
	for i := range pods.Items {
		if !pods.Items[i].Spec.HostNetwork {
			return withNamespace(ctx, cs, &pods.Items[i], ip)
		}
	}
	return policy.Endpoint{IP: ip}, true
}

func withNamespace(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, ip netip.Addr) (policy.Endpoint, bool) {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{})
	if err != nil {
		return policy.Endpoint{}, false
	}
	return policy.Endpoint{Pod: p, NamespaceLabels: ns.Labels, IP: ip}, true
}
