package ovnk

import (
	"encoding/json"
	"fmt"
	"net/netip"
)

// NodeSubnet parses k8s.ovn.org/node-subnets: {"default":["10.244.1.0/24"]}
// (or the older {"default":"10.244.1.0/24"}); the first IPv4 subnet.
func NodeSubnet(annotation string) (netip.Prefix, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(annotation), &m); err != nil {
		return netip.Prefix{}, fmt.Errorf("parse %s %q: %w", NodeSubnetsAnnotation, annotation, err)
	}
	var list []string
	if err := json.Unmarshal(m["default"], &list); err != nil {
		var one string
		if err := json.Unmarshal(m["default"], &one); err != nil {
			return netip.Prefix{}, fmt.Errorf("parse %s %q: no default network", NodeSubnetsAnnotation, annotation)
		}
		list = []string{one}
	}
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
			return p.Masked(), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("parse %s %q: no IPv4 subnet", NodeSubnetsAnnotation, annotation)
}

// podNetwork is the default network's entry of k8s.ovn.org/pod-networks, in
// OVN-Kubernetes' field order.
type podNetwork struct {
	IPAddresses []string `json:"ip_addresses"`
	MACAddress  string   `json:"mac_address"`
	GatewayIPs  []string `json:"gateway_ips"`
	IPAddress   string   `json:"ip_address"`
	GatewayIP   string   `json:"gateway_ip"`
}

// PodNetworks is the k8s.ovn.org/pod-networks annotation of a pod at ip in subnet.
func PodNetworks(ip netip.Addr, subnet netip.Prefix) string {
	addr := netip.PrefixFrom(ip, subnet.Bits()).String()
	gw := GatewayIP(subnet).String()
	b, _ := json.Marshal(map[string]podNetwork{"default": {
		IPAddresses: []string{addr}, MACAddress: MAC(ip), GatewayIPs: []string{gw}, IPAddress: addr, GatewayIP: gw,
	}})
	return string(b)
}

// PodIP reads the default network's address from a pod-networks annotation;
// the zero Addr when there is none.
func PodIP(annotation string) netip.Addr {
	var m map[string]podNetwork
	if json.Unmarshal([]byte(annotation), &m) != nil {
		return netip.Addr{}
	}
	p, err := netip.ParsePrefix(m["default"].IPAddress)
	if err != nil {
		return netip.Addr{}
	}
	return p.Addr()
}
