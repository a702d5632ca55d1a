package resolve

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/apierr"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Lookup is the read-only view of the cluster that resolution needs.
type Lookup interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Service(ctx context.Context, namespace, name string) (*corev1.Service, error)
	EndpointSlices(ctx context.Context, namespace, service string) ([]discoveryv1.EndpointSlice, error)
	Node(ctx context.Context, name string) (*corev1.Node, error)
	// Nodes, Services (every namespace's) and PodsWithIP are asked only
	// for a source outside the cluster (outside.go).
	Nodes(ctx context.Context) ([]corev1.Node, error)
	Services(ctx context.Context) ([]corev1.Service, error)
	PodsWithIP(ctx context.Context, ip netip.Addr) ([]corev1.Pod, error)
}

// FromClientset returns a Lookup backed by a clientset (real or fake).
func FromClientset(cs kubernetes.Interface) Lookup { return clientsetLookup{cs} }

type clientsetLookup struct{ cs kubernetes.Interface }

func (l clientsetLookup) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return l.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}

func (l clientsetLookup) Service(ctx context.Context, ns, name string) (*corev1.Service, error) {
	return l.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
}

func (l clientsetLookup) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return l.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func (l clientsetLookup) Nodes(ctx context.Context) ([]corev1.Node, error) {
	list, err := l.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (l clientsetLookup) Services(ctx context.Context) ([]corev1.Service, error) {
	list, err := l.cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PodsWithIP lists the pods whose IP is ip; the field selector narrows the
// list where the API server serves it, the check here where it does not.
func (l clientsetLookup) PodsWithIP(ctx context.Context, ip netip.Addr) ([]corev1.Pod, error) {
	list, err := l.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.podIP=" + ip.String()})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if slices.ContainsFunc(p.Status.PodIPs, func(a corev1.PodIP) bool { return a.IP == ip.String() }) || p.Status.PodIP == ip.String() {
			out = append(out, p)
		}
	}
	return out, nil
}

func (l clientsetLookup) EndpointSlices(ctx context.Context, ns, svc string) ([]discoveryv1.EndpointSlice, error) {
	list, err := l.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc,
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Query is what the command parsed and validated, before the cluster is
// asked anything.
type Query struct {
	Source, Destination Ref
	// Namespace applies to refs that name none.
	Namespace string
	IPv6      bool
	// Protocol is empty when the user chose none: ICMP, or for a Service
	// its first port.
	Protocol traceflow.Protocol
	DstPort  int32
	Live     bool
	// Via names the node whose uplink receives a packet from outside
	// (SRC an IP address), "" for the destination's own node.
	Via string
}

// Endpoint is a resolved source or destination.
type Endpoint struct {
	Kind      Kind
	Namespace string
	Name      string
	// IP is the address of the chosen family: the pod's, the Service's
	// cluster IP, or the literal.
	IP netip.Addr
	// Node is where a pod runs, or the node itself for KindNode; empty for
	// Services and IPs.
	Node        string
	HostNetwork bool
}

// AsNode reports whether a probe from e leaves as its node's own traffic
// does: e is a node, or a pod on the host network (whose traffic is the
// node's). The helper on the node injects it where that traffic enters the
// bridge, from the address the node's kernel picks.
func (e Endpoint) AsNode() bool {
	return e.Kind == KindNode || (e.Kind == KindPod && e.HostNetwork)
}

// Result is a resolved query: what to trace, and what the user should know.
type Result struct {
	Source, Destination Endpoint
	Protocol            traceflow.Protocol
	DstPort             int32
	// Entry, for a source outside the cluster, says how its packet
	// reaches the destination Service; nil otherwise.
	Entry *Entry
	// Warnings do not stop the trace (a Service without endpoints).
	Warnings []string
}

// Resolve looks up the endpoints of q and checks that a probe between them
// can be traced. Bad input is an exitcode.Usage error; a cluster that cannot
// be asked is exitcode.Setup. It only reads.
func Resolve(ctx context.Context, l Lookup, q Query) (*Result, error) {
	res := &Result{Protocol: q.Protocol, DstPort: q.DstPort}
	switch {
	case q.Source.Kind == KindIP:
		if err := resolveOutside(ctx, l, q, res); err != nil {
			return nil, err
		}
		return res, nil
	case q.Via != "":
		return nil, exitcode.UsageErrorf("--via node/%s says which node's uplink receives a packet from outside the cluster, and SRC %s is in it: drop --via, or give an outside address as SRC", q.Via, q.Source)
	}
	src, err := resolveSource(ctx, l, q)
	if err != nil {
		return nil, err
	}
	if src.HostNetwork && !q.Live {
		// Its traffic is its node's: it leaves from the address the
		// node's kernel picks, which the helper there asks for.
		src.IP = netip.Addr{}
	}
	res.Source = src
	switch q.Destination.Kind {
	case KindIP:
		res.Destination = Endpoint{Kind: KindIP, IP: q.Destination.IP}
	case KindPod:
		if res.Destination, err = resolvePod(ctx, l, q.Destination, q, "destination"); err != nil {
			return nil, err
		}
	case KindNode:
		if res.Destination, err = resolveNode(ctx, l, q.Destination.Name, q, "destination"); err != nil {
			return nil, err
		}
	case KindService:
		if err := resolveService(ctx, l, q, res); err != nil {
			return nil, err
		}
	}
	if res.Protocol == "" {
		res.Protocol = traceflow.ICMP
	}
	return res, nil
}

func resolveSource(ctx context.Context, l Lookup, q Query) (Endpoint, error) {
	if q.Source.Kind != KindNode {
		return resolvePod(ctx, l, q.Source, q, "source")
	}
	if q.Live {
		return Endpoint{}, exitcode.UsageErrorf("--live traces a pod's own traffic, and SRC node/%s is a node: drop --live to send a probe from the node, or give a pod as SRC", q.Source.Name)
	}
	ep, err := resolveNode(ctx, l, q.Source.Name, q, "source")
	// The probe leaves from the address the node's kernel picks for the
	// destination (a management port's, a gateway's), which only the
	// helper on the node can ask: the node's listed address may not be it.
	ep.IP = netip.Addr{}
	return ep, err
}

// resolveNode finds a node's address of the family asked for: its
// InternalIP, else its ExternalIP (the address the node's kubelet reports).
func resolveNode(ctx context.Context, l Lookup, name string, q Query, role string) (Endpoint, error) {
	node, err := l.Node(ctx, name)
	if err != nil {
		return Endpoint{}, apiError(err, fmt.Sprintf("%s node %s", role, name), "check the name with 'kubectl get nodes'")
	}
	var internal, external []string
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			internal = append(internal, a.Address)
		case corev1.NodeExternalIP:
			external = append(external, a.Address)
		}
	}
	ip, ok := nodeAddress(node, q.IPv6)
	if !ok {
		have := strings.Join(nonEmpty(append(internal, external...)), ", ")
		if have == "" {
			return Endpoint{}, exitcode.UsageErrorf("%s node %s reports no InternalIP or ExternalIP address (kubectl get node %s -o wide): a probe needs one", role, name, name)
		}
		return Endpoint{}, exitcode.UsageErrorf("%s node %s has no %s address (it has %s): %s", role, name, family(q.IPv6), have, familyFix(q.IPv6))
	}
	return Endpoint{Kind: KindNode, Name: name, Node: name, IP: ip}, nil
}

// nodeAddress is a node's address of the family: its InternalIP, else its
// ExternalIP.
func nodeAddress(node *corev1.Node, ipv6 bool) (netip.Addr, bool) {
	var internal, external []string
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			internal = append(internal, a.Address)
		case corev1.NodeExternalIP:
			external = append(external, a.Address)
		}
	}
	if ip, ok := pickIP(internal, ipv6); ok {
		return ip, true
	}
	return pickIP(external, ipv6)
}

func namespaceOf(r Ref, q Query) string {
	if r.Namespace != "" {
		return r.Namespace
	}
	return q.Namespace
}

func family(ipv6 bool) string {
	if ipv6 {
		return "IPv6"
	}
	return "IPv4"
}

// pickIP returns the first of ips in the family asked for.
func pickIP(ips []string, ipv6 bool) (netip.Addr, bool) {
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err == nil && ip.Unmap().Is6() == ipv6 {
			return ip.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

func resolvePod(ctx context.Context, l Lookup, r Ref, q Query, role string) (Endpoint, error) {
	ns := namespaceOf(r, q)
	pod, err := l.Pod(ctx, ns, r.Name)
	if err != nil {
		return Endpoint{}, apiError(err, fmt.Sprintf("%s pod %s/%s", role, ns, r.Name),
			fmt.Sprintf("check the name with 'kubectl get pods -n %s', or give the namespace as NAMESPACE/NAME or with -n", ns))
	}
	ep := Endpoint{Kind: KindPod, Namespace: ns, Name: r.Name, Node: pod.Spec.NodeName, HostNetwork: pod.Spec.HostNetwork}
	if pod.DeletionTimestamp != nil {
		return Endpoint{}, exitcode.UsageErrorf("%s pod %s/%s is being deleted: pick a pod that is Running (kubectl get pods -n %s)", role, ns, r.Name, ns)
	}
	if pod.Status.Phase != corev1.PodRunning {
		phase := string(pod.Status.Phase)
		if phase == "" {
			phase = "not yet scheduled"
		}
		return Endpoint{}, exitcode.UsageErrorf("%s pod %s/%s is %s, not Running: wait until it runs (kubectl get pod -n %s %s -w) or pick a Running pod",
			role, ns, r.Name, phase, ns, r.Name)
	}
	ips := []string{pod.Status.PodIP}
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	ip, ok := pickIP(ips, q.IPv6)
	if !ok {
		have := strings.Join(nonEmpty(ips), ", ")
		if have == "" {
			return Endpoint{}, exitcode.UsageErrorf("%s pod %s/%s has no IP address yet: wait until it has one (kubectl get pod -n %s %s -o wide)", role, ns, r.Name, ns, r.Name)
		}
		return Endpoint{}, exitcode.UsageErrorf("%s pod %s/%s has no %s address (it has %s): %s", role, ns, r.Name, family(q.IPv6), have, familyFix(q.IPv6))
	}
	ep.IP = ip
	return ep, nil
}

func familyFix(ipv6 bool) string {
	if ipv6 {
		return "drop --ipv6 (and give an IPv4 destination)"
	}
	return "add --ipv6"
}

func nonEmpty(list []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range list {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// apiError classifies an error from the API server: a missing object is the
// user's input (exit 1), anything else is the cluster (exit 4).
func apiError(err error, what, fix string) error {
	denied := apierr.Say{Before: "not allowed to read " + what + ": ",
		After: "; ask for RBAC permission to get pods, services and endpointslices there, or check --context and --kubeconfig"}
	return apierr.Wrap(err, apierr.Messages{
		NotFound:     what + " not found: " + fix,
		Forbidden:    denied,
		Unauthorized: denied,
		Other: apierr.Say{Before: "cannot read " + what + " from the Kubernetes API: ",
			After: "; check that the cluster is reachable ('kubectl get pods') and --context/--kubeconfig are right"},
	})
}
