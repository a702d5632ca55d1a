package ovnk

import (
	"fmt"
	"net/netip"
)

// IPAM hands out pod addresses from each node's subnet as OVN-Kubernetes'
// allocator does: never the network address, the gateway (.1), the
// management port (.2) or the broadcast address; lowest free first; an
// address is free again once its pod is released. It is rebuilt after a
// restart by Assign-ing every pod the address it already has.
type IPAM struct {
	subnets map[string]netip.Prefix
	owner   map[netip.Addr]string
	byOwner map[string]netip.Addr
}

// NewIPAM returns an empty allocator.
func NewIPAM() *IPAM {
	return &IPAM{subnets: map[string]netip.Prefix{}, owner: map[netip.Addr]string{}, byOwner: map[string]netip.Addr{}}
}

// SetSubnet records NODE's pod subnet.
func (p *IPAM) SetSubnet(node string, subnet netip.Prefix) { p.subnets[node] = subnet.Masked() }

// Assign returns OWNER's address on NODE: the one it holds if that is still in
// the node's subnet, else WANT if it is usable and free (a restart reading
// existing annotations), else the lowest free address.
func (p *IPAM) Assign(owner, node string, want netip.Addr) (netip.Addr, error) {
	subnet, ok := p.subnets[node]
	if !ok {
		return netip.Addr{}, fmt.Errorf("node %s has no subnet yet", node)
	}
	if ip, ok := p.byOwner[owner]; ok {
		if subnet.Contains(ip) {
			return ip, nil
		}
		p.Release(owner)
	}
	if want.IsValid() && usable(subnet, want) && p.owner[want] == "" {
		p.take(owner, want)
		return want, nil
	}
	for ip := firstPodIP(subnet); subnet.Contains(ip); ip = ip.Next() {
		if !usable(subnet, ip) {
			break
		}
		if p.owner[ip] == "" {
			p.take(owner, ip)
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("subnet %s of node %s is full", subnet, node)
}

// Release frees OWNER's address.
func (p *IPAM) Release(owner string) {
	if ip, ok := p.byOwner[owner]; ok {
		delete(p.owner, ip)
		delete(p.byOwner, owner)
	}
}

// Owners lists who holds an address.
func (p *IPAM) Owners() []string { return sortedKeys(p.byOwner) }

func (p *IPAM) take(owner string, ip netip.Addr) {
	p.owner[ip] = owner
	p.byOwner[owner] = ip
}

// GatewayIP is the subnet's .1, the router port's address.
func GatewayIP(subnet netip.Prefix) netip.Addr { return subnet.Masked().Addr().Next() }

// ManagementIP is the subnet's .2, the management port's address.
func ManagementIP(subnet netip.Prefix) netip.Addr { return GatewayIP(subnet).Next() }

func firstPodIP(subnet netip.Prefix) netip.Addr { return ManagementIP(subnet).Next() }

// usable: in the subnet, above the management port, below the broadcast.
func usable(subnet netip.Prefix, ip netip.Addr) bool {
	subnet = subnet.Masked()
	if !ip.Is4() || !subnet.Contains(ip) || ip.Compare(firstPodIP(subnet)) < 0 {
		return false
	}
	return subnet.Contains(ip.Next()) // not the broadcast address
}
