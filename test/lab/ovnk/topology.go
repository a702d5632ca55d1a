package ovnk

import (
	"fmt"
	"net/netip"
	"sort"
)

// Node is a node with its pod subnet (from k8s.ovn.org/node-subnets).
type Node struct {
	Name   string
	Subnet netip.Prefix
}

// Pod is a pod with its assigned address, as far as OVN needs it.
type Pod struct {
	Namespace, Name, Node, UID string
	Labels                     map[string]string
	IP                         netip.Addr
}

// Key is NAMESPACE/NAME.
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// SwitchState is a node switch with the rows hanging off it; references
// (ports, ACLs, load balancers) are by name or id, resolved when applied.
type SwitchState struct {
	Switch  LogicalSwitch
	Ports   []LogicalSwitchPort
	ACLs    []ACL
	LBNames []string
}

// Topology is the router port and switch of every node, with its pods'
// ports, as OVN-Kubernetes' node and pod controllers build them.
func Topology(nodes []Node, pods []Pod) ([]LogicalRouterPort, []SwitchState) {
	byNode := map[string][]Pod{}
	for _, p := range pods {
		byNode[p.Node] = append(byNode[p.Node], p)
	}
	nodes = append([]Node(nil), nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	var lrps []LogicalRouterPort
	var sws []SwitchState
	for _, n := range nodes {
		gw := GatewayIP(n.Subnet)
		lrps = append(lrps, LogicalRouterPort{
			Name:     RouterToSwitch(n.Name),
			MAC:      MAC(gw),
			Networks: []string{netip.PrefixFrom(gw, n.Subnet.Bits()).String()},
		})
		mgmt := ManagementIP(n.Subnet)
		sw := SwitchState{
			Switch: LogicalSwitch{Name: n.Name, OtherConfig: map[string]string{"subnet": n.Subnet.Masked().String()}},
			Ports: []LogicalSwitchPort{
				{
					Name: SwitchToRouter(n.Name), Type: "router", Addresses: []string{"router"},
					Options: map[string]string{"router-port": RouterToSwitch(n.Name)},
				},
				{Name: ManagementPort(n.Name), Addresses: []string{MAC(mgmt) + " " + mgmt.String()}},
			},
			ACLs: []ACL{allowFromNodeACL(n.Name, mgmt)},
		}
		ps := byNode[n.Name]
		sort.Slice(ps, func(i, j int) bool { return ps[i].Key() < ps[j].Key() })
		for _, p := range ps {
			sw.Ports = append(sw.Ports, PodLSP(p))
		}
		sws = append(sws, sw)
	}
	return lrps, sws
}

// PodLSP is a pod's logical switch port, as addLogicalPortToNetwork builds it.
func PodLSP(p Pod) LogicalSwitchPort {
	addr := MAC(p.IP) + " " + p.IP.String()
	opts := map[string]string{"requested-chassis": p.Node}
	if p.UID != "" {
		opts["iface-id-ver"] = p.UID
	}
	return LogicalSwitchPort{
		Name:         PodPort(p.Namespace, p.Name),
		Addresses:    []string{addr},
		PortSecurity: []string{addr},
		Options:      opts,
		ExternalIDs:  map[string]string{"namespace": p.Namespace, "pod": "true"},
	}
}

// allowFromNodeACL lets the node (kubelet probes) through any policy: OVN-
// Kubernetes' addAllowACLFromNode, on the node switch itself.
func allowFromNodeACL(node string, mgmt netip.Addr) ACL {
	ids := newIDs(ownerNetpolNode, keyName, node, "ip", mgmt.String())
	return ACL{
		Priority: allowPriority, Direction: "to-lport", Action: "allow-related",
		Match: "ip4.src==" + mgmt.String(), ExternalIDs: ids.externalIDs(),
	}
}

// egressPriority is the reroute policies' priority, OVN-Kubernetes' for
// its reroutes of pod traffic to a node's management port.
const egressPriority = 1004

// EgressPolicies take each node's pods' packets to the networks outside the
// cluster (outside) to the node's management port, where the node's kernel
// routes them and masquerades them to the node's address (lab-up's
// iptables rule), as OVN-Kubernetes' local gateway mode sends pod traffic
// out through the host. Only those destinations: an address of the pod
// range that no node holds still finds no route in the router.
func EgressPolicies(nodes []Node, outside []netip.Prefix) []LogicalRouterPolicy {
	var out []LogicalRouterPolicy
	for _, n := range nodes {
		for _, o := range outside {
			ids := newIDs(ownerNodeEgress, keyName, n.Name, "ip", o.Masked().String())
			out = append(out, LogicalRouterPolicy{
				Priority: egressPriority, Action: "reroute", Nexthops: []string{ManagementIP(n.Subnet).String()},
				Match:       fmt.Sprintf("ip4.src == %s && ip4.dst == %s", n.Subnet.Masked(), o.Masked()),
				ExternalIDs: ids.externalIDs(),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Match < out[j].Match })
	return out
}

// EgressRoutes give the router a route to each outside network at all:
// OVN routes (lr_in_ip_routing) before it applies policies (lr_in_policy)
// and drops what has no route, so the reroutes above need one. It points
// to the first node's management port; every node's pods are rerouted to
// their own node by EgressPolicies.
func EgressRoutes(nodes []Node, outside []netip.Prefix) []LogicalRouterStaticRoute {
	if len(nodes) == 0 {
		return nil
	}
	first := nodes[0]
	for _, n := range nodes[1:] {
		if n.Name < first.Name {
			first = n
		}
	}
	var out []LogicalRouterStaticRoute
	for _, o := range outside {
		ids := newIDs(ownerNodeEgress, keyName, "route", "ip", o.Masked().String())
		out = append(out, LogicalRouterStaticRoute{IPPrefix: o.Masked().String(), Nexthop: ManagementIP(first.Subnet).String(), ExternalIDs: ids.externalIDs()})
	}
	return out
}
