package tracer

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
)

// A probe from the node itself (--source-node) enters the pipeline where
// the node's own packets to the destination do: the node's kernel routes
// them out of one interface, and where that interface is a port of the
// bridge (Antrea's gateway, OVN-Kubernetes' management port), that port
// is where the probe is injected, with the source address the kernel
// would give the packet and the MACs it would put on it. Nothing is
// assumed of the CNI: the kernel's answer decides, and where its route
// leaves through an interface that is not on the bridge, the node's
// packets never meet this pipeline, which the helper says rather than
// inject somewhere they do not go.

// Route is the kernel's answer to "how does this node send to DST".
type Route struct {
	// Dev is the output interface and MAC its address.
	Dev string
	MAC net.HardwareAddr
	// Gateway is the next hop; invalid for an on-link destination.
	Gateway netip.Addr
	// Src is the source address the kernel picks.
	Src     netip.Addr
	ifindex int
}

// NextHop is the address the node resolves to a MAC to send to dst.
func (r Route) NextHop(dst netip.Addr) netip.Addr {
	if r.Gateway.IsValid() {
		return r.Gateway
	}
	return dst
}

// nodeSource finds the port the node's own packets to spec.Destination
// enter the bridge through (route is the kernel's route to it), and fills
// in the probe's source addresses where the flags left them out; next is
// the address whose MAC the probe must carry.
func nodeSource(br *ovsdb.Bridge, spec *TraceSpec, route Route) (p *ovsdb.Port, next netip.Addr, err error) {
	p, err = br.FindPort(route.Dev)
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("the node sends to %s through %s, which is not a port of bridge %s: its own packets to %s do not enter this pipeline, so there is nothing here to trace from the node",
			spec.Destination, route.Dev, br.Name, spec.Destination)
	}
	if !spec.SourceIP.IsValid() {
		if !route.Src.IsValid() {
			return nil, netip.Addr{}, fmt.Errorf("the node's route to %s through %s gives no %s source address: pass --source-ip", spec.Destination, route.Dev, family(spec.Destination))
		}
		spec.SourceIP = route.Src
	}
	if spec.SourceMAC == nil {
		if len(route.MAC) == 0 {
			return nil, netip.Addr{}, fmt.Errorf("interface %s has no MAC address: pass --source-mac", route.Dev)
		}
		spec.SourceMAC = route.MAC
	}
	return p, route.NextHop(spec.Destination), nil
}

// neighborMAC is the MAC the kernel's ARP table (the text of
// /proc/net/arp) holds for ip on dev, for a complete entry only; nil
// where there is none.
func neighborMAC(arp io.Reader, ip netip.Addr, dev string) net.HardwareAddr {
	sc := bufio.NewScanner(arp)
	for sc.Scan() {
		// IP address, HW type, Flags, HW address, Mask, Device
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[0] != ip.String() || f[5] != dev {
			continue
		}
		// ATF_COM (0x2): the entry is resolved.
		var flags int
		if _, err := fmt.Sscanf(f[2], "0x%x", &flags); err != nil || flags&0x2 == 0 {
			continue
		}
		if mac, err := net.ParseMAC(f[3]); err == nil && !isZeroMAC(mac) {
			return mac
		}
	}
	return nil
}

func isZeroMAC(m net.HardwareAddr) bool {
	for _, b := range m {
		if b != 0 {
			return false
		}
	}
	return true
}

// antreaHostLocalSourceMark is the mark Antrea's iptables rule (mangle
// ANTREA-OUTPUT: "mark LOCAL output packets") puts on every packet the
// node itself sends out of antrea-gw0, bit 31; its IngressSecurityClassifier
// lets packets with it past ingress policy, which is how the kubelet's
// probes reach isolated pods (pipeline.go, localProbeFlows, Antrea v2.3).
const antreaHostLocalSourceMark = 1 << 31

// hostMark is the pkt_mark the node's own packet carries into the bridge,
// for a probe from the node: Antrea's host-local mark where the pipeline is
// Antrea's (its IngressSecurityClassifier table) and the datapath is the
// kernel's, which carries the skb mark into OVS; nothing on a userspace
// (netdev) datapath, which does not (measured in the lab: the kubelet's
// probes of an isolated pod are dropped there), nor on other pipelines,
// whose marks the helper does not know to be the kernel's.
func hostMark(spec TraceSpec, names TableNames, datapathType string) uint32 {
	if !spec.SourceNode || datapathType == "netdev" {
		return 0
	}
	for _, n := range names {
		if n == "IngressSecurityClassifier" {
			return antreaHostLocalSourceMark
		}
	}
	return 0
}
