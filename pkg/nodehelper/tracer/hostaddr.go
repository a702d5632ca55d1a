package tracer

import (
	"net"
	"net/netip"
	"slices"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// HostAddrs lists the addresses the node's own network stack holds on the
// host interface behind a bridge port (an internal port such as Antrea's
// antrea-gw0 or OVN-Kubernetes' ovn-k8s-mp0); none for a port with no
// host interface of that name.
type HostAddrs func(port string) []netip.Addr

// ToOwnAddress turns an output that leaves the pod network into Delivered
// where the port is the host's own interface and the packet's destination
// is one of that interface's addresses: the packet has reached the host it
// was sent to, it is not going anywhere further. Antrea's agent says the
// same (Delivered, for a packet to the gateway's IP out of the gateway
// port: its traceflow packetin.go), and real traffic agrees: the node
// answers. A node's other addresses (its uplink's) stay
// ForwardedOutOfNetwork, as Antrea has them: the packet still has to be
// routed there.
func ToOwnAddress(v Verdict, dst netip.Addr, addrs HostAddrs) Verdict {
	if v.Action != report.ActionForwardedOutOfNetwork || v.Port == nil || v.Port.IsTunnel() || !dst.IsValid() || addrs == nil {
		return v
	}
	if !slices.Contains(addrs(v.Port.Name), dst.Unmap()) {
		return v
	}
	v.Action = report.ActionDelivered
	v.Reason = "the destination " + dst.String() + " is the node's own address on port " + v.Port.Name + "; " + v.Reason
	return v
}

// interfaceAddrs reads the addresses of the host interface called port.
// The helper runs in the node's network namespace (hostNetwork), so these
// are the node's.
func interfaceAddrs(port string) []netip.Addr {
	ifc, err := net.InterfaceByName(port)
	if err != nil {
		return nil
	}
	list, err := ifc.Addrs()
	if err != nil {
		return nil
	}
	return netAddrs(list)
}

// netAddrs are the IP addresses of an interface address list.
func netAddrs(list []net.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range list {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}
