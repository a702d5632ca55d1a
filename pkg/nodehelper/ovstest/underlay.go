package ovstest

import (
	"fmt"
	"strings"
)

// underlay state of a node joined to others.
type underlay struct {
	UnderlayIP  string
	underlayMAC string
	peers       []*Node
}

// Join connects nodes a and b: a veth underlay between their namespaces,
// each end on a br-phy bridge whose internal port holds the node's
// underlay IP (OVS's userspace tunnels route through an OVS bridge), and a
// Geneve port tun0 (remote_ip=flow, as Antrea) on each br-int. The tunnel
// neighbour is seeded with tnl/arp/set, or OVS would drop the first packet
// while it resolves it.
func Join(a, b *Node) {
	a.t.Helper()
	for _, n := range []*Node{a, b} {
		if n.UnderlayIP == "" {
			n.UnderlayIP = fmt.Sprintf("192.168.77.%d", n.Index)
			n.underlayMAC = fmt.Sprintf("02:00:c0:a8:4d:%02x", n.Index)
			n.Vsctl("add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev",
				"other_config:hwaddr=\""+n.underlayMAC+"\"")
			n.Sh(strings.Join([]string{
				"sysctl -qw net.ipv4.conf.all.arp_ignore=1",
				"ip addr add " + n.UnderlayIP + "/24 dev br-phy",
				"ip link set br-phy up",
			}, "\n"))
			n.Vsctl("add-port", n.Bridge, "tun0", "--", "set", "interface", "tun0", "type=geneve",
				"options:remote_ip=flow", "options:key=flow", fmt.Sprintf("ofport_request=%d", TunnelOfport))
			n.checkOfport("tun0")
		}
	}
	ua, ub := fmt.Sprintf("u%d%d", a.Index, b.Index), fmt.Sprintf("u%d%d", b.Index, a.Index)
	a.mustRun("ip", "link", "add", ua, "netns", a.NS, "type", "veth", "peer", "name", ub, "netns", b.NS)
	for _, x := range []struct {
		n    *Node
		dev  string
		peer *Node
	}{{a, ua, b}, {b, ub, a}} {
		x.n.Sh("ip link set " + x.dev + " up")
		x.n.Vsctl("add-port", "br-phy", x.dev)
		x.n.checkOfport(x.dev)
		x.n.peers = append(x.n.peers, x.peer)
	}
	a.Appctl("tnl/arp/set", "br-phy", b.UnderlayIP, b.underlayMAC)
	b.Appctl("tnl/arp/set", "br-phy", a.UnderlayIP, a.underlayMAC)
}
