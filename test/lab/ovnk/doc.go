// Package ovnk is the lab's OVN controller, the part of ovnkube-controller the
// lab needs: it translates Nodes, Pods, ClusterIP Services and NetworkPolicies
// into OVN northbound rows shaped and named as OVN-Kubernetes writes them, so
// that a trace through the lab's OVN pipeline meets the same logical switches,
// ports, load balancers, port groups and ACLs (with the same external_ids) as
// a trace through a real OVN-Kubernetes cluster.
//
// The translation is pure (Build, Topology, ServiceLBs, Policies, IPAM);
// Apply writes the difference to the NB database in one transaction;
// Controller runs both on every change. README.md lists the OVN-Kubernetes
// conventions followed and those left out.
package ovnk
