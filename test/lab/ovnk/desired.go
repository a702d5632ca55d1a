package ovnk

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Input is the cluster as the controller sees it, addresses assigned.
type Input struct {
	Nodes         []Node
	Pods          []Pod
	Namespaces    map[string]map[string]string
	Services      []*corev1.Service
	Slices        map[string][]*discoveryv1.EndpointSlice // by Service NAMESPACE/NAME
	Policies      []*networkingv1.NetworkPolicy
	HairpinSNATIP string
	// Outside are the networks beyond the cluster the pods reach through
	// their node (EgressPolicies).
	Outside []netip.Prefix
}

// Desired is every NB row this controller owns, references by name.
type Desired struct {
	RouterPorts []LogicalRouterPort
	// Routes and Policies are ovn_cluster_router's routes to the outside
	// networks and reroutes to each node (EgressRoutes, EgressPolicies).
	Routes        []LogicalRouterStaticRoute
	Policies      []LogicalRouterPolicy
	Switches      []SwitchState
	LoadBalancers []LoadBalancer
	AddressSets   []AddressSet
	PortGroups    []PortGroupState
}

// Build translates the cluster into the NB rows OVN-Kubernetes would write.
// Every cluster-IP load balancer is attached to every node switch, as
// buildClusterLBs does without load balancer groups.
func Build(in Input) Desired {
	var d Desired
	d.RouterPorts, d.Switches = Topology(in.Nodes, in.Pods)
	d.Routes, d.Policies = EgressRoutes(in.Nodes, in.Outside), EgressPolicies(in.Nodes, in.Outside)
	for _, svc := range in.Services {
		d.LoadBalancers = append(d.LoadBalancers, ServiceLBs(svc, in.Slices[svc.Namespace+"/"+svc.Name], in.HairpinSNATIP)...)
	}
	var lbNames []string
	for _, lb := range d.LoadBalancers {
		lbNames = append(lbNames, lb.Name)
	}
	for i := range d.Switches {
		d.Switches[i].LBNames = lbNames
	}
	var nodes []string
	for _, n := range in.Nodes {
		nodes = append(nodes, n.Name)
	}
	d.PortGroups, d.AddressSets = Policies(Cluster{Pods: in.Pods, Namespaces: in.Namespaces}, in.Policies)
	d.PortGroups = append(d.PortGroups, ClusterPortGroup(nodes, in.HairpinSNATIP))
	return d
}
