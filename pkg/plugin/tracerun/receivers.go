package tracerun

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
)

// receivers are the nodes other than the sender's where the probe may
// arrive through a tunnel, and what the destination is.
type receivers struct {
	nodes []string
	// kind decides whether leaving the pod network is the end the user
	// wanted.
	kind outcome.DestinationKind
	// empty names a Service that has no ready endpoint ("NAMESPACE/NAME";
	// "" otherwise).
	empty string
}

// receiverNodes finds the receivers: the destination pod's node, a
// Service's endpoints' nodes, or the node of the pod that owns a
// destination IP. The destination is a pod on the pod network, a Service,
// an IP a pod holds, or outside the cluster's pods (a node's IP, a
// host-network pod, an external address).
func (r *Runner) receiverNodes(ctx context.Context, res *resolve.Result) (receivers, error) {
	set := map[string]bool{}
	dst := res.Destination
	out := receivers{kind: outcome.DestinationOutside}
	var err error
	switch dst.Kind {
	case resolve.KindPod:
		set[dst.Node] = true
		if !dst.HostNetwork {
			out.kind = outcome.DestinationPod
		}
	case resolve.KindNode:
		// The node's own address is outside the pod network; a helper
		// there sees the probe if it arrives through a tunnel.
		set[dst.Node] = true
	case resolve.KindIP:
		if err := r.ipReceivers(ctx, dst.IP, set, &out); err != nil {
			return receivers{}, err
		}
	case resolve.KindService:
		out.kind = outcome.DestinationService
		if out.empty, err = r.endpointNodes(ctx, dst.Namespace, dst.Name, set); err != nil {
			return receivers{}, err
		}
	}
	delete(set, res.Source.Node)
	delete(set, "")
	out.nodes = make([]string, 0, len(set))
	for n := range set {
		out.nodes = append(out.nodes, n)
	}
	sort.Strings(out.nodes)
	return out, nil
}

// ipReceivers adds to set the node of the pod that holds ip, or else the
// nodes of the endpoints of the Service whose cluster IP it is.
func (r *Runner) ipReceivers(ctx context.Context, ip netip.Addr, set map[string]bool, out *receivers) error {
	pods, err := r.Clients.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("status.podIP", ip.String()).String(),
	})
	if err == nil {
		for _, p := range pods.Items {
			if !p.Spec.HostNetwork && p.Status.Phase == corev1.PodRunning {
				set[p.Spec.NodeName] = true
				out.kind = outcome.DestinationPodIP
			}
		}
	} else {
		// Without permission to list pods cluster-wide the trace still
		// runs: the sender's observations alone say where the packet
		// went. Whether the IP is a pod's is unknown: say how the
		// verdict will be read.
		r.note("Warning: cannot tell whether %s is a pod's IP (list pods cluster-wide: %v); a packet that leaves the pod network will count as delivered\n", ip, err)
	}
	if out.kind != outcome.DestinationOutside {
		return nil
	}
	// A Service's cluster IP given bare: the probe goes to one of its
	// endpoints, whose nodes must be watching for it as they are for
	// svc/NAME, or a probe tunnelled to one is never seen arriving.
	svc, err := r.serviceWithClusterIP(ctx, ip)
	switch {
	case err != nil:
		r.note("Warning: cannot tell whether %s is a Service's cluster IP (list Services cluster-wide: %v); a probe sent to another node's endpoint will not be seen arriving\n", ip, err)
	case svc != nil:
		out.kind = outcome.DestinationService
		if out.empty, err = r.endpointNodes(ctx, svc.Namespace, svc.Name, set); err != nil {
			return err
		}
	}
	return nil
}

// endpointNodes adds to set the nodes of the ready endpoints of Service
// ns/name; where it has none, empty is "ns/name".
func (r *Runner) endpointNodes(ctx context.Context, ns, name string, set map[string]bool) (empty string, err error) {
	slices, err := r.Clients.Lookup.EndpointSlices(ctx, ns, name)
	if err != nil {
		return "", exitcode.Errorf(exitcode.Setup, "list the endpoints of Service %s/%s: %w", ns, name, err)
	}
	ready := 0
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready++
				if e.NodeName != nil {
					set[*e.NodeName] = true
				}
			}
		}
	}
	if ready == 0 {
		empty = ns + "/" + name
	}
	return empty, nil
}

// serviceWithClusterIP is the Service that holds ip as one of its cluster
// IPs, or nil. All Services are listed and matched here: the field
// selector spec.clusterIP is not served by every API server this plugin
// supports.
func (r *Runner) serviceWithClusterIP(ctx context.Context, ip netip.Addr) (*corev1.Service, error) {
	list, err := r.Clients.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		svc := &list.Items[i]
		for _, s := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
			if a, err := netip.ParseAddr(s); err == nil && a == ip {
				return svc, nil
			}
		}
	}
	return nil, nil
}

// note tells people something beside the view; a note that cannot be
// written must not stop the trace.
func (r *Runner) note(format string, a ...any) {
	if r.Notes != nil {
		_, _ = fmt.Fprintf(r.Notes, format, a...)
	}
}
