package resolve

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// A source outside the cluster (SRC an IP address that is no pod's and no
// node's) sends what a client out there sends: a packet to a Service's
// NodePort on a node's address, to one of its externalIPs or to its
// LoadBalancer IP, arriving on the uplink of one node (the via node: the
// destination node for a NodePort, else --via). Nothing else is reachable
// from outside through the cluster's own dataplane, so nothing else is
// traced: any other destination is refused before anything is created.

// Entry says how a packet from outside reaches a Service.
type Entry struct {
	// How is "NodePort", "externalIP" or "LoadBalancer IP".
	How string
	// Via is the node whose uplink receives the packet.
	Via string
}

// resolveOutside resolves a query whose SRC is an IP address: the source
// outside the cluster and the Service its packet reaches.
func resolveOutside(ctx context.Context, l Lookup, q Query, res *Result) error {
	src := q.Source.IP
	if q.Live {
		return exitcode.UsageErrorf("--live traces a pod's own traffic, and SRC %s is an address outside the cluster: drop --live", src)
	}
	if q.Protocol != traceflow.TCP && q.Protocol != traceflow.UDP {
		return exitcode.UsageErrorf("from outside (SRC %s) a packet reaches a Service on a port (its NodePort, externalIP or LoadBalancer IP): give --tcp PORT or --udp PORT", src)
	}
	if err := notInCluster(ctx, l, src); err != nil {
		return err
	}
	nodes, err := l.Nodes(ctx)
	if err != nil {
		return apiError(err, "the nodes", "a trace from outside needs to read them")
	}
	if n := nodeWithAddress(nodes, src); n != "" {
		return exitcode.UsageErrorf("SRC %s is node %s's address, not one outside the cluster: give node/%s as SRC", src, n, n)
	}
	dst, via, err := outsideDestination(q, nodes)
	if err != nil {
		return err
	}
	svcs, err := l.Services(ctx)
	if err != nil {
		return apiError(err, "the Services", "a trace from outside needs to read them to find the one it reaches")
	}
	owner := nodeWithAddress(nodes, dst)
	svc, how := serviceFromOutside(svcs, dst, owner != "", q)
	if svc == nil {
		return noEntry(q, dst, owner)
	}
	if via == "" {
		return exitcode.UsageErrorf("%s %s is not a node's: say which node's uplink receives the packet with --via node/NAME", how, dst)
	}
	if err := viaReady(nodes, via); err != nil {
		return err
	}
	res.Source = Endpoint{Kind: KindIP, IP: src, Node: via}
	res.Destination = Endpoint{Kind: KindService, Namespace: svc.Namespace, Name: svc.Name, IP: dst}
	res.Entry = &Entry{How: how, Via: via}
	what := fmt.Sprintf("Service %s/%s", svc.Namespace, svc.Name)
	if w := endpointsWarning(ctx, l, svc.Namespace, svc.Name, what, q.IPv6); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	return nil
}

// notInCluster refuses a source address that a pod or a node holds: its
// packets are that pod's or node's, which SRC names otherwise.
func notInCluster(ctx context.Context, l Lookup, ip netip.Addr) error {
	pods, err := l.PodsWithIP(ctx, ip)
	if err != nil {
		return apiError(err, "the pods with IP "+ip.String(), "a trace from outside checks that its source is no pod's")
	}
	if len(pods) == 0 {
		return nil
	}
	p := pods[0]
	if p.Spec.HostNetwork {
		return exitcode.UsageErrorf("SRC %s is node %s's address (pod %s/%s runs on its host network): give node/%s as SRC", ip, p.Spec.NodeName, p.Namespace, p.Name, p.Spec.NodeName)
	}
	return exitcode.UsageErrorf("SRC %s is pod %s/%s's address, not one outside the cluster: give the pod as SRC (%s/%s)", ip, p.Namespace, p.Name, p.Namespace, p.Name)
}

// outsideDestination is the address the packet from outside goes to, and
// the node whose uplink receives it where the destination says (a node's
// address); --via must agree with it.
func outsideDestination(q Query, nodes []corev1.Node) (netip.Addr, string, error) {
	var dst netip.Addr
	owner := ""
	switch q.Destination.Kind {
	case KindNode:
		n := nodeNamed(nodes, q.Destination.Name)
		if n == nil {
			return dst, "", exitcode.UsageErrorf("destination node %s not found: check the name with 'kubectl get nodes'", q.Destination.Name)
		}
		ip, ok := nodeAddress(n, q.IPv6)
		if !ok {
			return dst, "", exitcode.UsageErrorf("destination node %s has no %s address: %s", n.Name, family(q.IPv6), familyFix(q.IPv6))
		}
		dst, owner = ip, n.Name
	case KindIP:
		dst = q.Destination.IP
		owner = nodeWithAddress(nodes, dst)
	default:
		return dst, "", exitcode.UsageErrorf("from outside (SRC %s) a packet reaches a Service through a NodePort (DST node/NAME with --tcp NODEPORT), an externalIP or a LoadBalancer IP (DST that IP, with --via node/NAME), not %s %s directly", q.Source.IP, q.Destination.Kind, q.Destination)
	}
	switch {
	case q.Via == "":
		return dst, owner, nil
	case owner != "" && q.Via != owner:
		return dst, "", exitcode.UsageErrorf("--via node/%s: the packet to %s arrives on node %s's own uplink, not %s's: drop --via, or give node/%s", q.Via, dst, owner, q.Via, owner)
	}
	return dst, q.Via, nil
}

// serviceFromOutside is the Service that a packet to dst on the query's
// port reaches from outside, and how: a NodePort where dst is a node's
// address (onNode), else an externalIP or a LoadBalancer ingress IP with
// that port.
func serviceFromOutside(svcs []corev1.Service, dst netip.Addr, onNode bool, q Query) (*corev1.Service, string) {
	for i := range svcs {
		svc := &svcs[i]
		for _, p := range svc.Spec.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			if string(proto) != string(q.Protocol) {
				continue
			}
			switch {
			case onNode && p.NodePort == q.DstPort:
				return svc, "NodePort"
			case !onNode && p.Port == q.DstPort && slices.Contains(svc.Spec.ExternalIPs, dst.String()):
				return svc, "externalIP"
			case !onNode && p.Port == q.DstPort && slices.ContainsFunc(svc.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool { return in.IP == dst.String() }):
				return svc, "LoadBalancer IP"
			}
		}
	}
	return nil, ""
}

func noEntry(q Query, dst netip.Addr, node string) error {
	if node != "" {
		return exitcode.UsageErrorf("no Service has %s NodePort %d, so nothing answers it on node %s from outside: check with 'kubectl get services -A' (the second number of PORT(S), as 80:30080/TCP)", q.Protocol, q.DstPort, node)
	}
	return exitcode.UsageErrorf("%s is no node's address and no Service's externalIP or LoadBalancer IP with %s port %d: from outside (SRC %s) a packet reaches a Service only so; check with 'kubectl get services -A -o wide'", dst, q.Protocol, q.DstPort, q.Source.IP)
}

// viaReady refuses a via node that does not exist or is not Ready: its
// uplink receives nothing the cluster answers.
func viaReady(nodes []corev1.Node, via string) error {
	n := nodeNamed(nodes, via)
	if n == nil {
		return exitcode.UsageErrorf("--via node/%s: no such node: check the name with 'kubectl get nodes'", via)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return exitcode.UsageErrorf("--via node/%s: the node is not Ready ('kubectl get node %s'), so no helper can run there to receive the packet: give a Ready node", via, via)
}

// nodeWithAddress is the name of the node that reports ip among its
// addresses, "" for none.
func nodeWithAddress(nodes []corev1.Node, ip netip.Addr) string {
	for i := range nodes {
		if slices.ContainsFunc(nodes[i].Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == ip.String() }) {
			return nodes[i].Name
		}
	}
	return ""
}

func nodeNamed(nodes []corev1.Node, name string) *corev1.Node {
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i]
		}
	}
	return nil
}
