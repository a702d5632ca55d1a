// Package agent is the lab network agent's pure part: from a node's view of
// the cluster (its pods' OVS ports, the other nodes, Services and
// NetworkPolicies) it builds the OpenFlow groups and flows of an Antrea-like
// pipeline, as ovs-ofctl text. Tables carry Antrea's names (set in OVSDB
// Flow_Table rows) so that TABLE_FEATURES reports them as on an Antrea node.
package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// Table numbers of the pipeline, in packet order.
const (
	TablePipelineRootClassifier = iota
	TableARPSpoofGuard
	TableARPResponder
	TableClassifier
	TableSpoofGuard
	TableUnSNAT
	TableConntrackZone
	TableConntrackState
	TableServiceLB
	TableEndpointDNAT
	TableEgressRule
	TableEgressDefaultRule
	TableL3Forwarding
	TableL3DecTTL
	TableSNAT
	TableL2ForwardingCalc
	TableIngressRule
	TableIngressDefaultRule
	TableConntrackCommit
	TableOutput
)

// TableNames are Antrea's names for the tables above, by number.
var TableNames = []string{
	"PipelineRootClassifier", "ARPSpoofGuard", "ARPResponder", "Classifier", "SpoofGuard",
	"UnSNAT", "ConntrackZone", "ConntrackState", "ServiceLB", "EndpointDNAT", "EgressRule", "EgressDefaultRule",
	"L3Forwarding", "L3DecTTL", "SNAT", "L2ForwardingCalc", "IngressRule", "IngressDefaultRule",
	"ConntrackCommit", "Output",
}

const (
	// GlobalVirtualMAC is Antrea's destination MAC for packets into the tunnel.
	GlobalVirtualMAC = "aa:bb:cc:dd:ee:ff"
	ctZone           = 65520
	// snatCtZone and HairpinIP: a pod that reaches itself through a Service
	// sees the connection come from HairpinIP (Antrea's virtual Service IP),
	// or its kernel would drop a packet from its own address.
	snatCtZone = 65521
	// HairpinIP is the source of hairpin Service connections; pods route it
	// through their gateway.
	HairpinIP = "169.254.0.253"
	// reg0[0..3] says where a packet came from (Antrea's PktSourceField).
	fromTunnel   = "0x1/0xf"
	fromGateway  = "0x2/0xf"
	fromLocalPod = "0x3/0xf"
	// reg0 bit 16: reg1 holds the output port (Antrea's OFPortFoundRegMark).
	portFound = "0x10000/0x10000"
	// ct_mark bit 4: a Service connection, committed with its DNAT already.
	serviceCTMark = "0x10/0x10"
)

// Config is what a node knows about itself.
type Config struct {
	GatewayIP  netip.Addr // the pods' next hop (answered by ARPResponder)
	GatewayMAC string
	// GatewayPort is antrea-gw0, the node's own way into the pod network
	// (kubelet probes); 0 when the node has none.
	GatewayPort int
	TunnelPort  int
	// Outside are the networks beyond the cluster that local pods reach
	// through antrea-gw0, as Antrea sends what is not the cluster's out
	// of its gateway: the node's kernel masquerades them to the node's
	// address (egress.go in cmd/lab-agent) and un-NATs the answers into
	// antrea-gw0. Only with a GatewayPort.
	Outside []netip.Prefix
}

// LocalPod is a pod attached to this node's br-int.
type LocalPod struct {
	Namespace, Name string
	IP              netip.Addr
	MAC             string
	OFPort          int
}

// RemoteNode is another node: packets for its pod CIDR go through the tunnel.
type RemoteNode struct {
	Name    string
	PodCIDR netip.Prefix
	NodeIP  netip.Addr
}

// Endpoint is one backend of a Service port.
type Endpoint struct {
	IP   netip.Addr
	Port int
}

// ServicePort is one ClusterIP:port with its ready endpoints.
type ServicePort struct {
	Key       string // namespace/name:port, for a stable group id
	ClusterIP netip.Addr
	Protocol  string // tcp or udp
	Port      int
	Endpoints []Endpoint
}

// PortProto is a destination port of a policy rule; Port 0 means any port.
type PortProto struct {
	Protocol string
	Port     int
}

// Rule allows traffic to (ingress) or from (egress) the Local pods: from or to
// Peers (nil: anywhere) on Ports (nil: any).
type Rule struct {
	Policy  string
	Ingress bool
	Local   []netip.Addr
	Peers   []netip.Prefix
	Ports   []PortProto
}

// Policies is the compiled NetworkPolicy state of a node.
type Policies struct {
	Rules           []Rule
	IngressIsolated []netip.Addr
	EgressIsolated  []netip.Addr
	// IngressReject and EgressReject are the isolated addresses whose
	// isolation rejects (the lab's reject annotation) instead of dropping.
	IngressReject []netip.Addr
	EgressReject  []netip.Addr
}

// State is the node's whole view.
type State struct {
	Pods     []LocalPod
	Nodes    []RemoteNode
	Services []ServicePort
	Policies Policies
	// GroupIDs maps ServicePort.Key to its OpenFlow group id.
	GroupIDs map[string]int
	// GatewayRouted are other nodes' pods (the lab's route annotation) that
	// this node sends out of its gateway, through the host's routing and
	// the underlay, instead of into the tunnel.
	GatewayRouted []netip.Addr
	// DroppedReplies are local pods' answers the lab drops (its
	// drop-replies annotation).
	DroppedReplies []ReplyDrop
}

func hexIP(a netip.Addr) string {
	b := a.As4()
	return fmt.Sprintf("0x%02x%02x%02x%02x", b[0], b[1], b[2], b[3])
}

func f(table, prio int, match, actions string) string {
	if match != "" {
		match = "," + match
	}
	return fmt.Sprintf("table=%d,priority=%d%s actions=%s", table, prio, match, actions)
}

func goTo(t int) string { return fmt.Sprintf("goto_table:%d", t) }

// Groups returns one select group per Service port, as ovs-ofctl group specs
// for OpenFlow 1.5. Each bucket loads the endpoint into reg3 (IP) and
// reg4[0..15] (port) and resubmits to EndpointDNAT.
func Groups(s State) []string {
	var out []string
	for _, sp := range s.Services {
		id := s.GroupIDs[sp.Key]
		g := fmt.Sprintf("group_id=%d,type=select,selection_method=hash,fields(ip_src,ip_dst,tcp_src,tcp_dst)", id)
		if sp.Protocol == "udp" {
			g = fmt.Sprintf("group_id=%d,type=select,selection_method=hash,fields(ip_src,ip_dst,udp_src,udp_dst)", id)
		}
		for i, ep := range sp.Endpoints {
			g += fmt.Sprintf(",bucket=bucket_id:%d,weight:100,actions=set_field:%s->reg3,set_field:0x%x/0xffff->reg4,resubmit(,%d)",
				i, hexIP(ep.IP), ep.Port, TableEndpointDNAT)
		}
		out = append(out, g)
	}
	return out
}

// Flows returns the node's whole flow table, sorted, as ovs-ofctl flow specs.
func Flows(c Config, s State) []string {
	var fl []string
	add := func(x ...string) { fl = append(fl, x...) }
	gw := c.GatewayIP.String()

	add(f(TablePipelineRootClassifier, 200, "arp", goTo(TableARPSpoofGuard)),
		f(TablePipelineRootClassifier, 200, "ip", goTo(TableClassifier)),
		f(TablePipelineRootClassifier, 0, "", "drop"))

	// Pods ask for the gateway (their route for other nodes' pods points at
	// it) and, on their own /24, for each other: answer both here.
	arpReply := func(ip, mac string) string {
		return f(TableARPResponder, 200, "arp,arp_op=1,arp_tpa="+ip,
			"move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:"+mac+"->eth_src,set_field:2->arp_op,"+
				"move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],set_field:"+mac+"->arp_sha,"+
				"move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],set_field:"+ip+"->arp_spa,IN_PORT")
	}
	add(arpReply(gw, c.GatewayMAC))
	for _, p := range s.Pods {
		add(arpReply(p.IP.String(), p.MAC))
	}
	add(
		f(TableARPResponder, 0, "", "drop"),
		f(TableARPSpoofGuard, 0, "", "drop"))

	if c.GatewayPort > 0 {
		gp := fmt.Sprintf("in_port=%d", c.GatewayPort)
		add(f(TableARPSpoofGuard, 200, "arp,"+gp, goTo(TableARPResponder)),
			// The node asks on antrea-gw0 for other nodes' pods and for
			// ClusterIPs: answer with the virtual MAC, L3Forwarding routes.
			f(TableARPResponder, 190, "arp,arp_op=1,"+gp,
				"move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],set_field:"+GlobalVirtualMAC+"->eth_src,set_field:2->arp_op,"+
					"move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],set_field:"+GlobalVirtualMAC+"->arp_sha,"+
					"move:NXM_OF_ARP_TPA[]->NXM_NX_REG2[],move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],move:NXM_NX_REG2[]->NXM_OF_ARP_SPA[],IN_PORT"),
			f(TableClassifier, 200, gp, "set_field:"+fromGateway+"->reg0,"+goTo(TableUnSNAT)),
			f(TableL3Forwarding, 200, "ip,nw_dst="+gw, "set_field:"+c.GatewayMAC+"->eth_dst,"+goTo(TableL3DecTTL)),
			f(TableL2ForwardingCalc, 200, "dl_dst="+c.GatewayMAC,
				fmt.Sprintf("set_field:0x%x->reg1,set_field:%s->reg0,%s", c.GatewayPort, portFound, goTo(TableConntrackCommit))))
	}
	add(f(TableClassifier, 200, fmt.Sprintf("in_port=%d", c.TunnelPort), "set_field:"+fromTunnel+"->reg0,"+goTo(TableUnSNAT)),
		f(TableClassifier, 0, "", "drop"),
		f(TableSpoofGuard, 0, "", "drop"))
	for _, p := range s.Pods {
		add(f(TableARPSpoofGuard, 200, fmt.Sprintf("arp,in_port=%d,arp_spa=%s,arp_sha=%s", p.OFPort, p.IP, p.MAC), goTo(TableARPResponder)),
			f(TableClassifier, 190, fmt.Sprintf("in_port=%d", p.OFPort), "set_field:"+fromLocalPod+"->reg0,"+goTo(TableSpoofGuard)),
			f(TableSpoofGuard, 200, fmt.Sprintf("ip,in_port=%d,dl_src=%s,nw_src=%s", p.OFPort, p.MAC, p.IP), goTo(TableUnSNAT)),
			// Hairpin: the Service sent the pod's packet back to the pod.
			f(TableSNAT, 200, fmt.Sprintf("ct_state=+new+trk,ip,nw_src=%s,nw_dst=%s", p.IP, p.IP),
				fmt.Sprintf("ct(commit,table=%d,zone=%d,nat(src=%s),exec(set_field:%s->ct_mark))", TableL2ForwardingCalc, snatCtZone, HairpinIP, serviceCTMark)),
			f(TableSNAT, 200, fmt.Sprintf("ct_state=-new+trk,ip,nw_src=%s,nw_dst=%s", p.IP, p.IP),
				fmt.Sprintf("ct(table=%d,zone=%d,nat)", TableL2ForwardingCalc, snatCtZone)),
			f(TableOutput, 210, fmt.Sprintf("reg0=%s,reg1=0x%x,in_port=%d", portFound, p.OFPort, p.OFPort), "IN_PORT"),
			f(TableL3Forwarding, 200, "ip,nw_dst="+p.IP.String(),
				"set_field:"+c.GatewayMAC+"->eth_src,set_field:"+p.MAC+"->eth_dst,"+goTo(TableL3DecTTL)),
			f(TableL2ForwardingCalc, 200, "dl_dst="+p.MAC,
				fmt.Sprintf("set_field:0x%x->reg1,set_field:%s->reg0,%s", p.OFPort, portFound, goTo(TableIngressRule))))
	}

	add(f(TableUnSNAT, 200, "ip,nw_dst="+HairpinIP, fmt.Sprintf("ct(table=%d,zone=%d,nat)", TableConntrackZone, snatCtZone)),
		f(TableUnSNAT, 0, "", goTo(TableConntrackZone)),
		f(TableSNAT, 0, "", goTo(TableL2ForwardingCalc)),
		f(TableConntrackZone, 200, "ip", fmt.Sprintf("ct(table=%d,zone=%d,nat)", TableConntrackState, ctZone)),
		f(TableConntrackZone, 0, "", "drop"),
		f(TableConntrackState, 200, "ct_state=+inv+trk,ip", "drop"),
		// Replies and established connections skip Service selection; their
		// NAT was undone or applied by ct(nat) in ConntrackZone.
		f(TableConntrackState, 190, "ct_state=-new+trk,ip", goTo(TableEgressRule)),
		f(TableConntrackState, 0, "", goTo(TableServiceLB)),
		f(TableServiceLB, 0, "", goTo(TableEgressRule)),
		f(TableEndpointDNAT, 0, "", goTo(TableEgressRule)))
	for _, sp := range s.Services {
		add(f(TableServiceLB, 200, fmt.Sprintf("%s,nw_dst=%s,tp_dst=%d", sp.Protocol, sp.ClusterIP, sp.Port),
			fmt.Sprintf("group:%d", s.GroupIDs[sp.Key])))
		for _, ep := range sp.Endpoints {
			add(f(TableEndpointDNAT, 200, fmt.Sprintf("%s,reg3=%s,reg4=0x%x/0xffff", sp.Protocol, hexIP(ep.IP), ep.Port),
				fmt.Sprintf("ct(commit,table=%d,zone=%d,nat(dst=%s:%d),exec(set_field:%s->ct_mark))",
					TableEgressRule, ctZone, ep.IP, ep.Port, serviceCTMark)))
		}
	}

	add(policyFlows(c, s.Policies)...)
	for _, d := range s.DroppedReplies {
		// Above the established connections' allow: the answer dies
		// where a policy would drop it, the request passes.
		add(f(TableEgressRule, 220, fmt.Sprintf("ct_state=+rpl+trk,%s,nw_src=%s,tp_src=%d", d.Protocol, d.IP, d.Port), "drop"))
	}
	add(rejectOutputFlow())

	for _, n := range s.Nodes {
		add(f(TableL3Forwarding, 190, "ip,nw_dst="+n.PodCIDR.String(),
			"set_field:"+c.GatewayMAC+"->eth_src,set_field:"+GlobalVirtualMAC+"->eth_dst,set_field:"+n.NodeIP.String()+"->tun_dst,"+goTo(TableL3DecTTL)))
	}
	if c.GatewayPort > 0 {
		// Above the tunnel's pod-CIDR flow: the packet leaves through
		// antrea-gw0 (L2ForwardingCalc picks the gateway by this MAC) and
		// the host routes it to the owning node over the underlay, where
		// it enters br-int through that node's gateway.
		for _, a := range s.GatewayRouted {
			add(f(TableL3Forwarding, 195, "ip,nw_dst="+a.String(), "set_field:"+c.GatewayMAC+"->eth_dst,"+goTo(TableL3DecTTL)))
		}
		// Egress: a local pod's packet to outside the cluster leaves
		// through antrea-gw0 into the node's kernel.
		for _, o := range c.Outside {
			add(f(TableL3Forwarding, 180, "ip,reg0="+fromLocalPod+",nw_dst="+o.String(), "set_field:"+c.GatewayMAC+"->eth_dst,"+goTo(TableL3DecTTL)))
		}
	}
	add(f(TableL3Forwarding, 0, "", "drop"),
		f(TableL3DecTTL, 200, "ip", "dec_ttl,"+goTo(TableSNAT)),
		// Ingress policy is enforced on the receiving node, so packets into
		// the tunnel skip it.
		f(TableL2ForwardingCalc, 200, "dl_dst="+GlobalVirtualMAC,
			fmt.Sprintf("set_field:0x%x->reg1,set_field:%s->reg0,%s", c.TunnelPort, portFound, goTo(TableConntrackCommit))),
		f(TableL2ForwardingCalc, 0, "", "drop"),
		f(TableConntrackCommit, 200, "ct_state=+new+trk,ct_mark="+serviceCTMark+",ip", goTo(TableOutput)),
		f(TableConntrackCommit, 190, "ct_state=+new+trk,ip", fmt.Sprintf("ct(commit,zone=%d),%s", ctZone, goTo(TableOutput))),
		f(TableConntrackCommit, 0, "", goTo(TableOutput)),
		f(TableOutput, 200, "reg0="+portFound, "output:NXM_NX_REG1[]"),
		f(TableOutput, 0, "", "drop"))
	sort.Strings(fl)
	return dedupe(fl)
}

func policyFlows(c Config, p Policies) []string {
	var fl []string
	fl = append(fl,
		f(TableEgressRule, 210, "ct_state=-new+est,ip", goTo(TableL3Forwarding)),
		// Related packets (an ICMP error about an allowed connection, a
		// reject's answer) pass too, as in Antrea.
		f(TableEgressRule, 210, "ct_state=-new+rel,ip", goTo(TableL3Forwarding)),
		f(TableIngressRule, 210, "ct_state=-new+rel,ip", goTo(TableConntrackCommit)),
		f(TableEgressRule, 0, "", goTo(TableEgressDefaultRule)),
		f(TableEgressDefaultRule, 0, "", goTo(TableL3Forwarding)),
		f(TableIngressRule, 210, "ct_state=-new+est,ip", goTo(TableConntrackCommit)),
		// As in Antrea, the node itself (kubelet probes, from its gateway
		// address) passes ingress policy; other nodes' pods routed in
		// through the gateway do not.
		f(TableIngressRule, 210, "ip,reg0="+fromGateway+",nw_src="+c.GatewayIP.String(), goTo(TableConntrackCommit)),
		f(TableIngressRule, 0, "", goTo(TableIngressDefaultRule)),
		f(TableIngressDefaultRule, 0, "", goTo(TableConntrackCommit)))
	isolate := func(table int, field string, addrs, reject []netip.Addr) {
		for _, a := range addrs {
			act := "drop"
			if slices.Contains(reject, a) {
				act = rejectActions(table)
			}
			fl = append(fl, f(table, 200, "ip,"+field+"="+a.String(), act))
		}
	}
	isolate(TableIngressDefaultRule, "nw_dst", p.IngressIsolated, p.IngressReject)
	isolate(TableEgressDefaultRule, "nw_src", p.EgressIsolated, p.EgressReject)
	for _, r := range p.Rules {
		table, next, localField, peerField := TableEgressRule, TableL3Forwarding, "nw_src", "nw_dst"
		if r.Ingress {
			table, next, localField, peerField = TableIngressRule, TableConntrackCommit, "nw_dst", "nw_src"
		}
		peers := r.Peers
		if peers == nil {
			peers = []netip.Prefix{{}}
		}
		ports := r.Ports
		if ports == nil {
			ports = []PortProto{{}}
		}
		for _, l := range r.Local {
			for _, peer := range peers {
				for _, pp := range ports {
					m := []string{"ip"}
					if pp.Protocol != "" {
						m = []string{pp.Protocol}
					}
					m = append(m, localField+"="+l.String())
					if peer.IsValid() {
						m = append(m, peerField+"="+peer.String())
					}
					if pp.Port != 0 {
						m = append(m, fmt.Sprintf("tp_dst=%d", pp.Port))
					}
					fl = append(fl, f(table, 200, strings.Join(m, ","), goTo(next)))
				}
			}
		}
	}
	return fl
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
