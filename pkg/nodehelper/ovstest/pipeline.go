package ovstest

import (
	"fmt"
	"net"
	"strings"
)

// Antrea-like table ids and names of the test pipeline.
const (
	TableClassifier         = 0
	TableSpoofGuard         = 1
	TableConntrackZone      = 5
	TableConntrackState     = 6
	TableServiceLB          = 8
	TableEndpointDNAT       = 9
	TableL3Forwarding       = 10
	TableIngressRule        = 12
	TableIngressDefaultRule = 13
	TableConntrackCommit    = 19
	TableOutput             = 20
	// TunnelOfport is the Geneve port's OpenFlow number.
	TunnelOfport = 100
	// Cookies per feature, as Antrea gives each feature its own cookie.
	CookieClassifier = 0x1000
	CookieSpoofGuard = 0x1001
	CookieConntrack  = 0x1002
	CookieService    = 0x1003
	CookieRouting    = 0x1004
	CookiePolicy     = 0x1005
	CookieOutput     = 0x1006
)

// TableNames are the names the pipeline gives its tables.
var TableNames = map[int]string{
	TableClassifier: "Classifier", TableSpoofGuard: "SpoofGuard", TableConntrackZone: "ConntrackZone",
	TableConntrackState: "ConntrackState", TableServiceLB: "ServiceLB", TableEndpointDNAT: "EndpointDNAT", TableL3Forwarding: "L3Forwarding",
	TableIngressRule: "IngressRule", TableIngressDefaultRule: "IngressDefaultRule", TableConntrackCommit: "ConntrackCommit", TableOutput: "Output",
}

// Service is a ClusterIP-like service: VIP:Port balanced by an OVS select
// group whose buckets DNAT with conntrack to the endpoints.
type Service struct {
	GroupID   int
	VIP       string
	Port      int
	Endpoints []string // IPv4 addresses; the port is Port
	// SelectionMethod is the group's selection_method: "" for OVS's
	// default (dp_hash on the userspace datapath, which ofproto/trace
	// cannot follow), or "hash" (chosen in ovs-vswitchd, which it can).
	SelectionMethod string
	// RegisterBuckets gives the group Antrea's shape: each bucket only
	// loads the endpoint into registers (reg3 its IP, reg4 its port) and
	// resubmits to EndpointDNAT, whose flows do the DNAT. With dp_hash,
	// ofproto/trace stops at the group, and the DNAT happens in a table the
	// probe reaches only after the datapath picked a bucket.
	RegisterBuckets bool
}

// Pipeline programs the node's Antrea-like pipeline: Classifier,
// SpoofGuard, ConntrackZone (ct nat), ConntrackState, ServiceLB (groups),
// L3Forwarding (local pods, remote nodes through the tunnel), IngressRule,
// IngressDefaultRule, ConntrackCommit and Output (output to reg1). Remote nodes are the
// nodes joined to this one.
func (n *Node) Pipeline(services ...Service) {
	n.t.Helper()
	n.NameTables(TableNames)
	var f []string
	add := func(format string, a ...any) { f = append(f, fmt.Sprintf(format, a...)) }
	add("table=%d,priority=200,cookie=%#x,in_port=%d,actions=goto_table:%d", TableClassifier, CookieClassifier, TunnelOfport, TableConntrackZone)
	add("table=%d,priority=0,cookie=%#x,actions=drop", TableSpoofGuard, CookieSpoofGuard)
	for _, p := range n.pods {
		add("table=%d,priority=190,cookie=%#x,in_port=%d,actions=goto_table:%d", TableClassifier, CookieClassifier, p.Ofport, TableSpoofGuard)
		add("table=%d,priority=200,cookie=%#x,ip,in_port=%d,dl_src=%s,nw_src=%s,actions=goto_table:%d", TableSpoofGuard, CookieSpoofGuard, p.Ofport, p.MAC, p.IP, TableConntrackZone)
		add("table=%d,priority=200,cookie=%#x,ipv6,in_port=%d,dl_src=%s,ipv6_src=%s,actions=goto_table:%d", TableSpoofGuard, CookieSpoofGuard, p.Ofport, p.MAC, p.IPv6, TableConntrackZone)
		add("table=%d,priority=200,cookie=%#x,ip,nw_dst=%s,actions=set_field:%s->eth_src,set_field:%s->eth_dst,set_field:%d->reg1,goto_table:%d",
			TableL3Forwarding, CookieRouting, p.IP, n.GatewayMAC, p.MAC, p.Ofport, TableIngressRule)
		add("table=%d,priority=200,cookie=%#x,ipv6,ipv6_dst=%s,actions=set_field:%s->eth_src,set_field:%s->eth_dst,set_field:%d->reg1,goto_table:%d",
			TableL3Forwarding, CookieRouting, p.IPv6, n.GatewayMAC, p.MAC, p.Ofport, TableIngressRule)
	}
	add("table=%d,priority=200,cookie=%#x,ip,actions=ct(table=%d,zone=65520,nat)", TableConntrackZone, CookieConntrack, TableConntrackState)
	add("table=%d,priority=200,cookie=%#x,ipv6,actions=ct(table=%d,zone=65510,nat)", TableConntrackZone, CookieConntrack, TableConntrackState)
	add("table=%d,priority=200,cookie=%#x,ct_state=+inv+trk,ip,actions=drop", TableConntrackState, CookieConntrack)
	add("table=%d,priority=0,cookie=%#x,actions=goto_table:%d", TableConntrackState, CookieConntrack, TableServiceLB)
	add("table=%d,priority=0,cookie=%#x,actions=goto_table:%d", TableServiceLB, CookieService, TableL3Forwarding)
	for _, s := range services {
		var buckets []string
		for _, ep := range s.Endpoints {
			if s.RegisterBuckets {
				buckets = append(buckets, fmt.Sprintf("bucket=set_field:%s->reg3,set_field:%d->reg4,resubmit(,%d)", ipHex(ep), s.Port, TableEndpointDNAT))
				add("table=%d,priority=200,cookie=%#x,tcp,reg3=%s,reg4=%d,actions=ct(commit,table=%d,zone=65520,nat(dst=%s:%d))",
					TableEndpointDNAT, CookieService, ipHex(ep), s.Port, TableL3Forwarding, ep, s.Port)
				continue
			}
			buckets = append(buckets, fmt.Sprintf("bucket=ct(commit,table=%d,zone=65520,nat(dst=%s:%d))", TableL3Forwarding, ep, s.Port))
		}
		method := ""
		if s.SelectionMethod != "" {
			method = "selection_method=" + s.SelectionMethod + ",fields(ip_src,ip_dst,tcp_src,tcp_dst),"
		}
		n.Ofctl("add-group", fmt.Sprintf("group_id=%d,type=select,%s%s", s.GroupID, method, strings.Join(buckets, ",")))
		add("table=%d,priority=200,cookie=%#x,ct_state=+new+trk,tcp,nw_dst=%s,tp_dst=%d,actions=group:%d", TableServiceLB, CookieService, s.VIP, s.Port, s.GroupID)
	}
	for _, r := range n.peers {
		add("table=%d,priority=200,cookie=%#x,ip,nw_dst=10.10.%d.0/24,actions=set_field:%s->eth_src,set_field:%s->tun_dst,set_field:%d->reg1,goto_table:%d",
			TableL3Forwarding, CookieRouting, r.Index, n.GatewayMAC, r.UnderlayIP, TunnelOfport, TableIngressRule)
		add("table=%d,priority=200,cookie=%#x,ipv6,ipv6_dst=fd00:10:%d::/64,actions=set_field:%s->eth_src,set_field:%s->tun_dst,set_field:%d->reg1,goto_table:%d",
			TableL3Forwarding, CookieRouting, r.Index, n.GatewayMAC, r.UnderlayIP, TunnelOfport, TableIngressRule)
	}
	add("table=%d,priority=0,cookie=%#x,actions=goto_table:%d", TableIngressRule, CookiePolicy, TableIngressDefaultRule)
	add("table=%d,priority=0,cookie=%#x,actions=goto_table:%d", TableIngressDefaultRule, CookiePolicy, TableConntrackCommit)
	add("table=%d,priority=200,cookie=%#x,ct_state=+new+trk,ip,actions=ct(commit,table=%d,zone=65520)", TableConntrackCommit, CookieConntrack, TableOutput)
	add("table=%d,priority=200,cookie=%#x,ct_state=+new+trk,ipv6,actions=ct(commit,table=%d,zone=65510)", TableConntrackCommit, CookieConntrack, TableOutput)
	add("table=%d,priority=0,cookie=%#x,actions=goto_table:%d", TableConntrackCommit, CookieConntrack, TableOutput)
	add("table=%d,priority=200,cookie=%#x,actions=output:NXM_NX_REG1[]", TableOutput, CookieOutput)
	n.AddFlows(strings.Join(f, "\n") + "\n")
	n.agentFlows = append(n.agentFlows, f...)
}

// DenyIngress adds a default-deny ingress drop for traffic to pod p in
// IngressDefaultRule, as a NetworkPolicy isolating p would.
func (n *Node) DenyIngress(p *Pod) string {
	n.t.Helper()
	flow := fmt.Sprintf("table=%d,priority=200,cookie=%#x,ip,reg1=%d,actions=drop", TableIngressDefaultRule, CookiePolicy, p.Ofport)
	n.AddFlows(flow + "\n")
	n.agentFlows = append(n.agentFlows, flow)
	return flow
}

// ipHex writes an IPv4 address as the 32-bit number a register holds.
func ipHex(ip string) string {
	a := net.ParseIP(ip).To4()
	return fmt.Sprintf("%#x", uint32(a[0])<<24|uint32(a[1])<<16|uint32(a[2])<<8|uint32(a[3]))
}

// ConjunctionRule is one rule of a ConjunctionPolicy: traffic from From to
// To on TCP port Port, allowed or dropped.
type ConjunctionRule struct {
	From, To *Pod
	Port     int
	Drop     bool
}

// ConjunctionPolicy programs rules in IngressRule the way Antrea programs
// a ClusterNetworkPolicy: each rule is a conjunctive match of three
// clauses, source address (1/3), destination port register reg1 (2/3) and
// TCP port (3/3), with a conj_id flow that drops or goes on to
// ConntrackCommit; a clause flow that several rules share carries one
// conjunction action per rule. Every flow has priority 14000 and the one
// cookie of the policy feature (CookiePolicy), and fillers more rules of
// the same shape for addresses nobody uses (10.77.x.y), so that the table
// is large and one cookie covers it all. Rule ids start at 1, as Antrea's.
// It returns the conjunction id of each rule, in order.
func (n *Node) ConjunctionPolicy(fillers int, rules ...ConjunctionRule) []uint32 {
	n.t.Helper()
	const prio = 14000
	var f []string
	add := func(format string, a ...any) { f = append(f, fmt.Sprintf(format, a...)) }
	conjs := map[string][]string{}
	var order []string
	clause := func(match string, id uint32, k int) {
		if _, ok := conjs[match]; !ok {
			order = append(order, match)
		}
		conjs[match] = append(conjs[match], fmt.Sprintf("conjunction(%d,%d/3)", id, k))
	}
	var ids []uint32
	id := uint32(0)
	for _, r := range rules {
		id++
		ids = append(ids, id)
		clause(fmt.Sprintf("ip,nw_src=%s", r.From.IP), id, 1)
		clause(fmt.Sprintf("ip,reg1=%d", r.To.Ofport), id, 2)
		clause(fmt.Sprintf("tcp,tp_dst=%d", r.Port), id, 3)
		action := fmt.Sprintf("goto_table:%d", TableConntrackCommit)
		if r.Drop {
			action = "drop"
		}
		add("table=%d,priority=%d,cookie=%#x,conj_id=%d,ip,actions=%s", TableIngressRule, prio, CookiePolicy, id, action)
	}
	for i := 0; i < fillers; i++ {
		id++
		clause(fmt.Sprintf("ip,nw_src=10.77.%d.%d", i/200, i%200+1), id, 1)
		clause(fmt.Sprintf("ip,reg1=%d", 200+i), id, 2)
		clause(fmt.Sprintf("tcp,tp_dst=%d", 10000+i), id, 3)
		add("table=%d,priority=%d,cookie=%#x,conj_id=%d,ip,actions=drop", TableIngressRule, prio, CookiePolicy, id)
	}
	for _, m := range order {
		add("table=%d,priority=%d,cookie=%#x,%s,actions=%s", TableIngressRule, prio, CookiePolicy, m, strings.Join(conjs[m], ","))
	}
	n.AddFlows(strings.Join(f, "\n") + "\n")
	n.agentFlows = append(n.agentFlows, f...)
	return ids
}
