package ovnk

import (
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
