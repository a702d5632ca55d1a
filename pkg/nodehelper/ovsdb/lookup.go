package ovsdb

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Tunnel interface types.
var tunnelTypes = map[string]bool{"geneve": true, "vxlan": true, "gre": true, "stt": true, "erspan": true, "ip6gre": true, "ip6erspan": true, "gtpu": true, "bareudp": true}

// IsTunnel reports whether the port is a tunnel.
func (p Port) IsTunnel() bool { return tunnelTypes[p.Type] }

// ExternalID returns an external_ids value, looking at the Port first.
func (p Port) ExternalID(key string) string {
	if v, ok := p.PortExternalIDs[key]; ok {
		return v
	}
	return p.IfaceExternalIDs[key]
}

// PodName returns "namespace/name" for a pod's port, or "".
//
// OVN-Kubernetes names a pod's logical port NAMESPACE_NAME in the
// Interface's iface-id. It also binds non-pod ports by iface-id: the
// node's management port (iface-id k8s-NODE on the internal port
// ovn-k8s-mp0), gateway ports. Namespaces, pod names and node names are
// DNS labels or subdomains, which hold no '_': an iface-id is a pod's only
// where it splits into exactly two parts at one '_', and never on an
// internal port (a pod's end is a veth or tap, not a port of the bridge's
// own).
func (p Port) PodName() string {
	if ns, name := p.ExternalID("pod-namespace"), p.ExternalID("pod-name"); ns != "" && name != "" {
		return ns + "/" + name
	}
	if ns, name, ok := SplitIfaceID(p.IfaceExternalIDs["iface-id"]); ok && p.Type != "internal" {
		return ns + "/" + name
	}
	return ""
}

// SplitIfaceID splits an OVN-Kubernetes pod's iface-id NAMESPACE_NAME.
func SplitIfaceID(id string) (namespace, name string, ok bool) {
	ns, name, ok := strings.Cut(id, "_")
	if !ok || ns == "" || name == "" || strings.Contains(name, "_") {
		return "", "", false
	}
	return ns, name, true
}

// ipKeys are the external_ids keys CNIs record a pod's IPs under: Antrea
// "ip", OVN-Kubernetes "ip_addresses" (CIDRs), others "ip-address".
var ipKeys = []string{"ip", "ip_addresses", "ip-address", "ip-addresses"}

// PodIPs returns the IPs that the CNI recorded for a pod's port
// (comma-separated for dual stack, with or without a prefix length).
func (p Port) PodIPs() []netip.Addr {
	var out []netip.Addr
	for _, k := range ipKeys {
		for _, s := range splitComma(p.ExternalID(k)) {
			if a, err := netip.ParseAddr(s); err == nil {
				out = append(out, a)
			} else if pf, err := netip.ParsePrefix(s); err == nil {
				out = append(out, pf.Addr())
			}
		}
	}
	return out
}

// PodPrefixes returns the recorded IPs that carry a prefix length
// (OVN-Kubernetes' ip_addresses "10.244.1.5/24"): the pod's on-link
// subnets, as its interface is configured.
func (p Port) PodPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, k := range ipKeys {
		for _, s := range splitComma(p.ExternalID(k)) {
			if pf, err := netip.ParsePrefix(s); err == nil {
				out = append(out, pf)
			}
		}
	}
	return out
}

// PodMAC returns the pod side MAC that the CNI recorded (Antrea: mac;
// OVN-Kubernetes: attached_mac; others attached-mac), or nil.
func (p Port) PodMAC() net.HardwareAddr {
	for _, k := range []string{"mac", "attached_mac", "attached-mac"} {
		if m, err := net.ParseMAC(p.ExternalID(k)); err == nil {
			return m
		}
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// Match says how a pod's port was found.
type Match string

// How ports are matched.
const (
	MatchAntrea  Match = "antrea external_ids pod-namespace/pod-name"
	MatchOVNK    Match = "ovn-kubernetes external_ids iface-id"
	MatchPortNam Match = "OVS port name"
	// MatchNodeRoute: the port the node's kernel routes the destination
	// through (a probe from the node itself).
	MatchNodeRoute Match = "the node's kernel route"
	// MatchUplink: the patch port through which the node's uplink bridge
	// sends a packet from outside into the bridge.
	MatchUplink Match = "the uplink bridge's patch port"
	// MatchUplinkStack: the uplink bridge's own port, through which the
	// node's stack takes a packet from outside before the pipeline does.
	MatchUplinkStack Match = "the uplink bridge's own port"
)

// FindPod finds the port of pod namespace/name: Antrea writes pod-name and
// pod-namespace in external_ids (on the Port), OVN-Kubernetes writes
// iface-id "NAMESPACE_NAME" on the Interface.
func (b *Bridge) FindPod(namespace, name string) (*Port, Match, error) {
	for i := range b.Ports {
		p := &b.Ports[i]
		if p.ExternalID("pod-namespace") == namespace && p.ExternalID("pod-name") == name {
			return p, MatchAntrea, nil
		}
	}
	for i := range b.Ports {
		p := &b.Ports[i]
		if p.IfaceExternalIDs["iface-id"] == namespace+"_"+name {
			return p, MatchOVNK, nil
		}
	}
	return nil, "", fmt.Errorf("no port on bridge %s belongs to pod %s/%s (looked for external_ids pod-namespace/pod-name and iface-id %s_%s): is the pod on this node?",
		b.Name, namespace, name, namespace, name)
}

// FindPort finds a port by its OVS name.
func (b *Bridge) FindPort(name string) (*Port, error) {
	for i := range b.Ports {
		if b.Ports[i].Name == name {
			return &b.Ports[i], nil
		}
	}
	return nil, fmt.Errorf("no port %q on bridge %s", name, b.Name)
}

// ByOfport finds a port by OpenFlow port number, or by name (trace output
// may print either).
func (b *Bridge) ByOfport(s string) *Port {
	n, err := strconv.Atoi(s)
	for i := range b.Ports {
		if (err == nil && b.Ports[i].Ofport == n) || b.Ports[i].Name == s {
			return &b.Ports[i]
		}
	}
	return nil
}

// PortByIP finds a pod port whose recorded IP is ip.
func (b *Bridge) PortByIP(ip netip.Addr) *Port {
	for i := range b.Ports {
		for _, a := range b.Ports[i].PodIPs() {
			if a == ip {
				return &b.Ports[i]
			}
		}
	}
	return nil
}

// Gateway returns the port that routes pod traffic off the bridge: Antrea's
// antrea-type=gateway, else the first internal port that is not the
// bridge's own, else the bridge's own port.
func (b *Bridge) Gateway() *Port {
	for i := range b.Ports {
		if b.Ports[i].ExternalID("antrea-type") == "gateway" {
			return &b.Ports[i]
		}
	}
	for i := range b.Ports {
		if b.Ports[i].Type == "internal" && b.Ports[i].Name != b.Name {
			return &b.Ports[i]
		}
	}
	for i := range b.Ports {
		if b.Ports[i].Name == b.Name {
			return &b.Ports[i]
		}
	}
	return nil
}

// Tunnels returns the tunnel ports that have an OpenFlow port number.
func (b *Bridge) Tunnels() []Port {
	var out []Port
	for _, p := range b.Ports {
		if p.IsTunnel() && p.Ofport > 0 {
			out = append(out, p)
		}
	}
	return out
}

// Arrivals returns the ports through which a packet from another node can
// enter the bridge: its tunnels, and every other port that is not a pod's
// (the gateway, the bridge's own LOCAL port, an uplink or a patch port to
// one), because a cluster that routes pod traffic without a tunnel (Antrea's
// noEncap or hybrid modes, a gateway route) delivers it through those.
// Ports OVS could not add are left out.
func (b *Bridge) Arrivals() []Port {
	out := b.Tunnels()
	for _, p := range b.Ports {
		if !p.IsTunnel() && p.Ofport > 0 && p.PodName() == "" {
			out = append(out, p)
		}
	}
	return out
}
