package tracer

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// fateVerdict decides the verdict of a path from the packet's real fate,
// the last pass's datapath actions, and finds the hop that decided.
//
//   - outputs: each datapath port is mapped (dpif/show) to its bridge port
//     (ofproto.DatapathPorts.Output: on the kernel datapath the tunnel
//     metadata picks among the tunnel ports sharing one number);
//     a tunnel port is Forwarded into the tunnel (its destination as the
//     datapath actions set it: tnl_push or set(tunnel(...))), a
//     pod port Delivered, anything else (gateway, uplink, LOCAL, a port of
//     another bridge) ForwardedOutOfNetwork. With several outputs an output
//     to a pod decides and the others are listed in Also. The deciding hop is
//     the last one that output to that port.
//   - no output, a controller action: Rejected where a hop's controller
//     action is a reject in the pipeline's convention (IsReject); else
//     Dropped there, since the agent got the packet and nothing left.
//   - no output, a recirculation the trace did not follow: Open.
//   - drop: Dropped at the last hop that ended the path (a drop action, a
//     table miss on the main path), or else at the last flow executed.
func fateVerdict(t ofproto.Trace, br *ovsdb.Bridge) (int, Verdict) {
	fate := ofproto.ParseDatapathActions(t.DatapathActions)
	last := lastPass(t)
	if len(fate.Outputs) > 0 {
		var vs []Verdict
		var hops []int
		for _, o := range fate.Outputs {
			v, hop := outputVerdict(t, br, last, o)
			vs, hops = append(vs, v), append(hops, hop)
		}
		pick := 0
		for i, v := range vs {
			if v.Action == report.ActionDelivered {
				pick = i
				break
			}
		}
		v := vs[pick]
		for i := range vs {
			if i != pick {
				v.Also = append(v.Also, vs[i])
			}
		}
		v.Reason = "datapath actions: " + fate.Raw
		return hops[pick], v
	}
	// OVN's arp {} pauses the packet for ovn-controller: OVS's trace
	// stops there, and its datapath actions need not show the controller
	// action (inside a check_pkt_len branch they do not: measured on the
	// genuine OVN-Kubernetes, a gateway router's first packet to the
	// lab's host).
	for i := len(t.Hops) - 1; i >= last; i-- {
		for _, c := range t.Hops[i].Controllers() {
			if IsNextHopResolution(c) {
				return i, heldForNextHop(c)
			}
		}
	}
	if fate.Controller {
		for i := len(t.Hops) - 1; i >= last; i-- {
			for _, c := range t.Hops[i].Controllers() {
				if IsReject(c) {
					return i, Verdict{Action: report.ActionRejected, Reason: fmt.Sprintf("a controller action whose userdata (% x) asks the pipeline's agent to reject the packet", c.Userdata)}
				}
			}
		}
		for i := len(t.Hops) - 1; i >= last; i-- {
			if len(t.Hops[i].Controllers()) > 0 {
				return i, Verdict{Action: report.ActionDropped, Reason: "handed to the OpenFlow controller, which the pipeline does not mark as a reject; the datapath outputs nothing"}
			}
		}
	}
	if i, v, ok := refusedOwnTunnel(t, br, last); ok {
		return i, v
	}
	if fate.Recirc {
		return lastHop(t), Verdict{Action: report.ActionForwarded, Open: true,
			Reason: "datapath actions end in a recirculation OVS's trace did not follow: " + fate.Raw}
	}
	return dropHop(t, last), Verdict{Action: report.ActionDropped, Reason: "datapath actions: " + orDrop(fate.Raw)}
}

func orDrop(s string) string {
	if s == "" {
		return "drop"
	}
	return s
}

// lastPass is the index of the first hop of the last datapath pass: the
// datapath actions are that pass's.
func lastPass(t ofproto.Trace) int {
	if len(t.Hops) == 0 {
		return 0
	}
	p := t.Hops[len(t.Hops)-1].Pass
	i := len(t.Hops) - 1
	for i > 0 && t.Hops[i-1].Pass == p {
		i--
	}
	return i
}

func lastHop(t ofproto.Trace) int { return len(t.Hops) - 1 }

// dropHop finds where a dropped packet's path ended within the last pass:
// the last drop action or main-path table miss, else the last flow that
// matched (a nested miss only returns to it), else the last hop.
func dropHop(t ofproto.Trace, from int) int {
	for i := len(t.Hops) - 1; i >= from; i-- {
		if t.Hops[i].Drops() {
			return i
		}
	}
	for i := len(t.Hops) - 1; i >= from; i-- {
		if !t.Hops[i].NoMatch {
			return i
		}
	}
	return lastHop(t)
}

// outputVerdict classifies one datapath output and finds the hop that made it.
func outputVerdict(t ofproto.Trace, br *ovsdb.Bridge, from int, o ofproto.DPOutput) (Verdict, int) {
	dp, known := t.Ports.Output(t.Bridge, o)
	if !known {
		// Without dpif/show, the hops' own outputs name the ports: the
		// last one output decides (the datapath actions still said that
		// the packet left).
		hop, port := lastOutput(t, from)
		v := portVerdict(br.ByOfport(port), o.TunnelDst)
		if v.Port == nil {
			v.PortName = port
		}
		return v, hop
	}
	if dp.Bridge != t.Bridge {
		// A patch port took the packet into another bridge, whose port it
		// leaves by: out of the traced bridge's pod network.
		hop, _ := lastOutput(t, from)
		return Verdict{Action: report.ActionForwardedOutOfNetwork, PortName: dp.Bridge + "/" + dp.Name}, hop
	}
	ofport := strconv.Itoa(dp.OFPort)
	p := br.ByOfport(ofport)
	if p == nil {
		p = br.ByOfport(dp.Name)
	}
	v := portVerdict(p, o.TunnelDst)
	if p == nil {
		v.PortName = dp.Name
	}
	return v, outputHop(t, from, ofport, dp.Name)
}

// portVerdict says what an output to port p means.
func portVerdict(p *ovsdb.Port, tunnelDst string) Verdict {
	switch {
	case p == nil:
		return Verdict{Action: report.ActionForwardedOutOfNetwork}
	case p.IsTunnel():
		dst := tunnelDst
		if dst == "" && p.Options["remote_ip"] != "flow" {
			dst = p.Options["remote_ip"]
		}
		return Verdict{Action: report.ActionForwarded, Port: p, TunnelDst: dst}
	case p.PodName() != "":
		return Verdict{Action: report.ActionDelivered, Port: p}
	default:
		return Verdict{Action: report.ActionForwardedOutOfNetwork, Port: p}
	}
}

// outputHop is the last hop that output to the port (by number or name),
// looking in the last pass first.
func outputHop(t ofproto.Trace, from int, ofport, name string) int {
	for _, start := range []int{from, 0} {
		for i := len(t.Hops) - 1; i >= start; i-- {
			for _, p := range t.Hops[i].Outputs() {
				if p == ofport || p == name {
					return i
				}
			}
		}
	}
	hop, _ := lastOutput(t, from)
	return hop
}

// lastOutput is the last hop of the last pass with an output, and its last
// output port; or the last hop and "" where none outputs.
func lastOutput(t ofproto.Trace, from int) (int, string) {
	for i := len(t.Hops) - 1; i >= from; i-- {
		if outs := t.Hops[i].Outputs(); len(outs) > 0 {
			return i, outs[len(outs)-1]
		}
	}
	return lastHop(t), ""
}

// IsReject says whether a controller action asks the pipeline's agent to
// reject the packet: to answer the source with a TCP RST or an ICMP
// unreachable in place of delivering it. OVS itself has no reject, and no
// packet-in reason means one: each agent encodes the request in the
// action's userdata. The rule recognises the encodings of the pipelines the
// tool is judged on; a pipeline that rejects another way is reported as
// Dropped at its controller action, never as delivered.
//
//   - Antrea (pkg/agent/openflow/packetin.go): userdata[0] is the packet-in
//     category. Category 1 (PacketInCategoryNP) with bit 0b10
//     (PacketInNPRejectOperation) in userdata[1] is a NetworkPolicy reject,
//     possibly together with logging (0b1) and deny tracking (0b100);
//     category 4 (PacketInCategorySvcReject) alone is a Service without
//     endpoints, which Antrea rejects. The lab's own pipeline writes the
//     NetworkPolicy form (controller(id=...,userdata=01.02)).
//   - OVN (include/ovn/actions.h): userdata starts with a big-endian 32-bit
//     opcode and 4 bytes of padding; reject {} (22), tcp_reset {} (11),
//     sctp_abort {} (24) and icmp4/icmp6 {} (10, an ICMP unreachable in
//     place of the packet) answer the source instead of forwarding.
//
// The two encodings cannot be mistaken for each other: Antrea's first byte
// is a category (1 or 4) and its userdata 1 or 2 bytes long, OVN's first
// byte is 0 and its userdata at least 8 bytes long.
func IsReject(c ofproto.ControllerAction) bool {
	u := c.Userdata
	switch {
	case len(u) == 2 && u[0] == antreaCategoryNP:
		return u[1]&antreaRejectOperation != 0
	case len(u) == 1:
		return u[0] == antreaCategorySvcReject
	case len(u) >= 8 && binary.BigEndian.Uint32(u[4:8]) == 0:
		return ovnRejectOpcodes[binary.BigEndian.Uint32(u)]
	}
	return false
}

// IsNextHopResolution says whether a controller action is OVN's arp {} or
// nd_ns {} (opcodes ACTION_OPCODE_ARP 0 and ACTION_OPCODE_ND_NS 9, in the
// encoding IsReject reads): a logical router that does not know its next
// hop's MAC hands the packet to ovn-controller, which sends an ARP request
// or a neighbor solicitation in its place, keeps the packet, and sends it
// on once the answer has taught it the MAC. The packet is not dropped;
// where it goes after that, OVS's trace does not say.
func IsNextHopResolution(c ofproto.ControllerAction) bool {
	u := c.Userdata
	if len(u) < 8 || binary.BigEndian.Uint32(u[4:8]) != 0 {
		return false
	}
	op := binary.BigEndian.Uint32(u)
	return op == ovnOpcodeARP || op == ovnOpcodeNDNS
}

// OVN's opcodes of next-hop resolution (include/ovn/actions.h).
const (
	ovnOpcodeARP  = 0
	ovnOpcodeNDNS = 9
)

// heldForNextHop is the verdict of a hop that hands the packet to
// ovn-controller to resolve its next hop's MAC (IsNextHopResolution).
func heldForNextHop(c ofproto.ControllerAction) Verdict {
	what := "an ARP request"
	if binary.BigEndian.Uint32(c.Userdata) == ovnOpcodeNDNS {
		what = "a neighbor solicitation"
	}
	return Verdict{Action: report.ActionForwarded, Open: true, Held: true,
		Reason: fmt.Sprintf("the logical router does not know the next hop's MAC: ovn-controller sends %s in the packet's place and keeps the packet, to send it on once the MAC is learned, out of the helper's sight (controller userdata % x)", what, c.Userdata)}
}

// Antrea's packet-in userdata (pkg/agent/openflow/packetin.go).
const (
	antreaCategoryNP        = 1
	antreaCategorySvcReject = 4
	antreaRejectOperation   = 0b10
)

// ovnRejectOpcodes are OVN's action opcodes that answer the source in
// place of the packet (ACTION_OPCODE_ICMP, TCP_RESET, REJECT, SCTP_ABORT).
var ovnRejectOpcodes = map[uint32]bool{10: true, 11: true, 22: true, 24: true}

// refusedOwnTunnel finds an output into a tunnel that OVS's trace refused in
// a pass it resumed after conntrack (">> Not tunneling to our own
// address"). Resuming, the trace takes the tunnel fields the pipeline set
// before conntrack (tun_dst) for the tunnel the packet arrived from, and
// will not send it back there; the datapath, whose recirculated packet
// arrived from no tunnel, tunnels it. Only a packet that really came from
// a tunnel (pass 0 entering on a tunnel port) would be refused.
func refusedOwnTunnel(t ofproto.Trace, br *ovsdb.Bridge, from int) (int, Verdict, bool) {
	if len(t.Hops) == 0 {
		return 0, Verdict{}, false
	}
	if in := br.ByOfport(t.Hops[0].InPort); in != nil && in.IsTunnel() {
		return 0, Verdict{}, false
	}
	for i := len(t.Hops) - 1; i >= from; i-- {
		h := t.Hops[i]
		if h.Pass == 0 {
			continue
		}
		for j, a := range h.Actions {
			if !strings.HasPrefix(a, ">> Not tunneling to our own address") || j == 0 {
				continue
			}
			port := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(h.Actions[j-1], "-> output port is "), "output:"))
			if p := br.ByOfport(port); p != nil && p.IsTunnel() {
				return i, Verdict{Action: report.ActionForwarded, Port: p, TunnelDst: remoteIP(p),
					Reason: "into tunnel " + p.Name + ": OVS's trace of the pass after conntrack refuses it (\"Not tunneling to our own address\"), the datapath does not"}, true
			}
		}
	}
	return 0, Verdict{}, false
}

// remoteIP is a tunnel port's fixed remote IP, or "" where the flow sets it.
func remoteIP(p *ovsdb.Port) string {
	if r := p.Options["remote_ip"]; r != "flow" {
		return r
	}
	return ""
}
