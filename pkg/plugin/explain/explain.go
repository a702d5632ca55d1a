// Package explain names the policy behind a drop, for either engine. OVS
// (and Antrea's agents) say which table dropped the probe; where that
// table is a Kubernetes NetworkPolicy's default deny, neither says which
// policy isolates the pod, nor why none of its rules lets the probe
// through (Antrea names no policy there). The plugin can: it evaluates the
// policies in the API against the probe's typed endpoints (package
// policy). Helper mode and agent mode call the same Explainer, so that a
// default deny reads the same whichever engine traced it.
package explain

import (
	"context"
	"net/netip"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/policy"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// budget bounds the lookups that name a policy: the verdict must not wait
// long for a nicety.
const budget = 2 * time.Second

// Explainer names the Kubernetes NetworkPolicies behind a drop in a policy
// table of one trace. Any lookup that fails (RBAC, a pod gone) leaves the
// observation unnamed: it never guesses.
type Explainer struct {
	kube        kubernetes.Interface
	source, dst resolve.Endpoint
	probe       policy.Probe
	// get reads a policy the dataplane names a rule of by its index; nil
	// where the client cannot make raw requests.
	get getObject
	// reads, where set, are shared with the run's other traces.
	reads *Reads
}

// Sharing makes e share its reads of the API with the other traces of a
// run through r (nil: none), and returns e.
func (e *Explainer) Sharing(r *Reads) *Explainer {
	e.reads = r
	return e
}

// New is the Explainer of the trace res resolved.
func New(kube kubernetes.Interface, res *resolve.Result) *Explainer {
	e := &Explainer{kube: kube, source: res.Source, dst: res.Destination, probe: probeOf(res)}
	if d := kube.Discovery(); d != nil {
		if rc := d.RESTClient(); rc != nil && !reflect.ValueOf(rc).IsNil() {
			e.get = func(ctx context.Context, path string) ([]byte, error) {
				return rc.Get().AbsPath(path).DoRaw(ctx)
			}
		}
	}
	return e
}

// ExplainDrop returns o with the policies that dropped the probe and why,
// where o is a drop in a policy table with no policy named, and the
// policies in the API explain it; otherwise o unchanged. hops are the
// trace's hops before o, in path order: a Service's load-balancing hop
// among them says which endpoint the probe really went to.
func (e *Explainer) ExplainDrop(ctx context.Context, hops []outcome.TimedHop, o report.Observation) report.Observation {
	if o.NetworkPolicy != "" && o.Component == report.ComponentNetworkPolicy {
		return e.nameRule(ctx, o)
	}
	// Kubernetes NetworkPolicies only allow: what they isolate is dropped,
	// never rejected, and a named drop is another kind of policy's.
	if o.Component != report.ComponentNetworkPolicy || o.NetworkPolicy != "" || o.Action.Normalize() != report.ActionDropped {
		return o
	}
	// A node's probe (a host-network pod's too) leaves from the address
	// its kernel picks, which only the helper knows: no peer to match the
	// policies' rules with.
	if e.source.AsNode() {
		return o
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	dir := direction(o.ComponentInfo)
	src, ok := e.endpointByName(ctx, e.source.Namespace, e.source.Name, e.source.IP)
	if !ok {
		return o
	}
	// The packet's real destination: the endpoint a Service chose, if any
	// hop translated it, else the destination itself.
	dstIP := e.dst.IP
	for _, h := range hops {
		if ip, err := netip.ParseAddr(h.Observation.TranslatedDstIP); err == nil {
			dstIP = ip
		}
	}
	var dst policy.Endpoint
	if e.dst.Kind == resolve.KindPod {
		dst, ok = e.endpointByName(ctx, e.dst.Namespace, e.dst.Name, dstIP)
	} else {
		dst, ok = e.endpointByIP(ctx, dstIP)
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
	policies, err := shared(e.reads, "policies/"+target.Pod.Namespace, func() ([]networkingv1.NetworkPolicy, error) {
		list, err := e.kube.NetworkingV1().NetworkPolicies(target.Pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	})
	if err != nil {
		return o
	}
	x, ok := policy.Explain(policies, dir, src, dst, e.probe)
	if !ok {
		return o
	}
	o.NetworkPolicy = strings.Join(x.Policies, ", ")
	o.NetworkPolicyRule = x.Rule
	return o
}

// direction is the side of the target pod a drop's table guards. Antrea's
// egress tables say Egress (EgressRule, EgressDefaultRule, EgressMetric);
// OVN applies a pod's egress (from-lport) ACLs in a switch's ingress
// pipeline (ls_in_acl, ls_in_acl_after_lb) and its ingress (to-lport) ACLs
// in the egress pipeline (ls_out_acl).
func direction(componentInfo string) policy.Direction {
	if strings.Contains(componentInfo, "Egress") || strings.HasPrefix(componentInfo, "ls_in_") {
		return policy.Egress
	}
	return policy.Ingress
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

func (e *Explainer) endpointByName(ctx context.Context, ns, name string, ip netip.Addr) (policy.Endpoint, bool) {
	p, err := shared(e.reads, "pod/"+ns+"/"+name, func() (*corev1.Pod, error) {
		return e.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return policy.Endpoint{}, false
	}
	return e.withNamespace(ctx, p, ip)
}

// endpointByIP finds the pod with ip; an IP no pod has is an outside peer.
func (e *Explainer) endpointByIP(ctx context.Context, ip netip.Addr) (policy.Endpoint, bool) {
	pods, err := shared(e.reads, "ip/"+ip.String(), func() ([]corev1.Pod, error) {
		list, err := e.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("status.podIP", ip.String()).String(),
		})
		if err != nil {
			return nil, err
		}
		return list.Items, nil
	})
	if err != nil {
		return policy.Endpoint{}, false
	}
	for i := range pods {
		if !pods[i].Spec.HostNetwork {
			return e.withNamespace(ctx, &pods[i], ip)
		}
	}
	return policy.Endpoint{IP: ip}, true
}

func (e *Explainer) withNamespace(ctx context.Context, p *corev1.Pod, ip netip.Addr) (policy.Endpoint, bool) {
	ns, err := shared(e.reads, "namespace/"+p.Namespace, func() (*corev1.Namespace, error) {
		return e.kube.CoreV1().Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{})
	})
	if err != nil {
		return policy.Endpoint{}, false
	}
	return policy.Endpoint{Pod: p, NamespaceLabels: ns.Labels, IP: ip}, true
}
