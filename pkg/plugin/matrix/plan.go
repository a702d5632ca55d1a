package matrix

// Planning a matrix against the cluster: its pods, the ports they serve,
// and its cells as traces of the check runner, resolved before anything is
// created.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Pods are the pods of a matrix: the Ready pods of the namespace
// that the selector matches, on the pod network (a hostNetwork pod's
// address is its node's, so a cell to it would not be a pod's), by name.
func Pods(ctx context.Context, cs kubernetes.Interface, ns, selector string) ([]corev1.Pod, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, exitcode.Errorf(exitcode.Setup, "list the pods of namespace %s: %w", ns, err)
	}
	var pods []corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.HostNetwork || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || !podIsReady(p) {
			continue
		}
		pods = append(pods, *p)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	if len(pods) < 2 {
		what := "the namespace's pods"
		if selector != "" {
			what = "selector " + selector
		}
		return nil, exitcode.UsageErrorf("%s: %d Ready pods on the pod network in namespace %s (of %d listed); a matrix needs at least two: check 'kubectl get pods -n %s%s'",
			what, len(pods), ns, len(list.Items), ns, selectorFlag(selector))
	}
	return pods, nil
}

func selectorFlag(s string) string {
	if s == "" {
		return ""
	}
	return " -l " + s
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Ports are the ports the destinations serve: their containers'
// declared ports, and the ports of the NetworkPolicy ingress rules that
// select them (a named port as the pod names it). A policy's port range
// (endPort) adds its first port only: a matrix of every port in a range is
// not what anyone reads.
func Ports(pods []corev1.Pod, policies []networkingv1.NetworkPolicy) []Port {
	set := map[Port]bool{}
	for i := range pods {
		for _, c := range pods[i].Spec.Containers {
			for _, cp := range c.Ports {
				if p, ok := portOf(cp.Protocol, cp.ContainerPort); ok {
					set[p] = true
				}
			}
		}
	}
	for i := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&policies[i].Spec.PodSelector)
		if err != nil {
			continue
		}
		for j := range pods {
			if sel.Matches(labels.Set(pods[j].Labels)) {
				policyPorts(&pods[j], policies[i].Spec.Ingress, set)
			}
		}
	}
	ports := make([]Port, 0, len(set))
	for p := range set {
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool {
		if ports[i].Protocol != ports[j].Protocol {
			return ports[i].Protocol < ports[j].Protocol
		}
		return ports[i].Number < ports[j].Number
	})
	return ports
}

func policyPorts(pod *corev1.Pod, rules []networkingv1.NetworkPolicyIngressRule, set map[Port]bool) {
	for _, r := range rules {
		for _, rp := range r.Ports {
			if rp.Port == nil {
				continue
			}
			proto := corev1.ProtocolTCP
			if rp.Protocol != nil {
				proto = *rp.Protocol
			}
			number := rp.Port.IntVal
			if rp.Port.StrVal != "" {
				number = namedPort(pod, rp.Port.StrVal, proto)
			}
			if p, ok := portOf(proto, number); ok {
				set[p] = true
			}
		}
	}
}

func namedPort(pod *corev1.Pod, name string, proto corev1.Protocol) int32 {
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == name && (cp.Protocol == proto || (cp.Protocol == "" && proto == corev1.ProtocolTCP)) {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

// portOf is a matrix port for a TCP or UDP port; SCTP is not traced.
func portOf(proto corev1.Protocol, n int32) (Port, bool) {
	if n < 1 || n > 65535 {
		return Port{}, false
	}
	switch proto {
	case corev1.ProtocolTCP, "":
		return Port{Protocol: traceflow.TCP, Number: n}, true
	case corev1.ProtocolUDP:
		return Port{Protocol: traceflow.UDP, Number: n}, true
	}
	return Port{}, false
}

// Traces are the grid's cells as traces of the check runner, in
// the grid's order. They are resolved against the pods already listed
// (podsLookup): a matrix of N pods asks the API server nothing for its
// N×(N-1)×ports resolutions. Every trace expects anything: a cell's state
// is judged against the expected matrix, not by the runner.
func Traces(ctx context.Context, g Grid, pods []corev1.Pod, ns string, roundTrip bool, timeout time.Duration) ([]check.Trace, []Cell, error) {
	l := podsLookup{}
	for i := range pods {
		l[pods[i].Namespace+"/"+pods[i].Name] = &pods[i]
	}
	cells := g.Cells()
	traces := make([]check.Trace, 0, len(cells))
	for _, cell := range cells {
		c := check.Case{Name: cell.String(), From: check.From{Namespace: ns, Pod: cell.From}, To: check.To{Namespace: ns, Pod: cell.To},
			Protocol: cell.Port.Protocol, Port: cell.Port.Number, Expect: outcome.ExpectAny, Timeout: timeout, RoundTrip: roundTrip}
		q := resolve.Query{Source: resolve.Ref{Kind: resolve.KindPod, Namespace: ns, Name: cell.From},
			Destination: resolve.Ref{Kind: resolve.KindPod, Namespace: ns, Name: cell.To},
			Namespace:   ns, Protocol: cell.Port.Protocol, DstPort: cell.Port.Number}
		res, err := resolve.Resolve(ctx, l, q)
		if err != nil {
			return nil, nil, fmt.Errorf("cell %s: %w", cell, err)
		}
		traces = append(traces, check.Trace{Case: c, File: SuiteName, Name: cell.String(), Result: res,
			Expect: outcome.ExpectAny, Timeout: timeout})
	}
	return traces, cells, nil
}

// SuiteName names the matrix's traces where a suite file would be
// named (the JUnit suite).
const SuiteName = "matrix"

// podsLookup resolves the matrix's own pods from the list it was made
// from; anything else is not a matrix's question.
type podsLookup map[string]*corev1.Pod

var _ resolve.Lookup = podsLookup(nil)

func (l podsLookup) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if p, ok := l[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("pod %s/%s is not one of the matrix's pods", ns, name)
}

func (l podsLookup) Service(context.Context, string, string) (*corev1.Service, error) {
	return nil, errNotMatrix
}

func (l podsLookup) EndpointSlices(context.Context, string, string) ([]discoveryv1.EndpointSlice, error) {
	return nil, errNotMatrix
}

func (l podsLookup) Node(context.Context, string) (*corev1.Node, error) { return nil, errNotMatrix }

func (l podsLookup) Nodes(context.Context) ([]corev1.Node, error) { return nil, errNotMatrix }

func (l podsLookup) Services(context.Context) ([]corev1.Service, error) { return nil, errNotMatrix }

func (l podsLookup) PodsWithIP(context.Context, netip.Addr) ([]corev1.Pod, error) {
	return nil, errNotMatrix
}

var errNotMatrix = errors.New("a matrix resolves its own pods only")
