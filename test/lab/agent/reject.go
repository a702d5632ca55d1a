package agent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// The lab's reject rule, done as Antrea does it.
//
// A NetworkPolicy annotated `lab.traceflow.dev/action: reject` rejects what
// it isolates instead of dropping it. Its default flow in IngressDefaultRule
// (or EgressDefaultRule) does not drop: like Antrea's conjunctionActionDenyFlow
// it marks the packet for the agent (reg0[21..22] = 2, Antrea's
// OutputToControllerRegMark; reg0[25..31] = 2, the reject bit of Antrea's
// PacketInOperationField; reg2[0..7] = the table that decided, Antrea's
// PacketInTableField) and goes to Output, where one flow sends it to the lab
// agent's OpenFlow connection with Antrea's packet-in userdata: category
// PacketInCategoryNP (1), operations PacketInNPRejectOperation (0b10). The
// agent then answers the source with a TCP RST (TCP) or an ICMP destination
// unreachable (port unreachable for UDP, communication administratively
// prohibited otherwise). Antrea reaches Output through an all-group that
// also counts the rule's metrics; the lab has no metrics, so it goes there
// directly. As `ovs-ofctl -O OpenFlow15 dump-flows --names br-int` prints
// them (recorded in the lab: pod 10.244.2.2 rejecting ingress; cookie
// 0x6c61000000000000 is the lab agent's):
//
//	cookie=0x6c61000000000000, table=IngressDefaultRule, priority=200,ip,nw_dst=10.244.2.2 actions=set_field:0x4400000/0xfe600000->reg0,set_field:0x11/0xff->reg2,goto_table:Output
//	cookie=0x6c61000000000000, table=Output, priority=220,reg0=0x4400000/0xfe600000 actions=controller(id=27745,userdata=01.02)
//
// (an egress reject is the same in EgressDefaultRule with nw_src and
// reg2=0xb), and as `ovs-appctl ofproto/trace` prints the last two hops and
// the verdict:
//
//	(tables 0 to 16 as for any packet to the pod)
//	17. ip,nw_dst=10.244.2.2, priority 200, cookie 0x6c61000000000000
//	    set_field:0x4400000/0xfe600000->reg0
//	    set_field:0x11/0xff->reg2
//	    goto_table:19
//	19. reg0=0x4400000/0xfe600000, priority 220, cookie 0x6c61000000000000
//	    controller(id=27745,userdata=01.02)
//	...
//	Datapath actions: set(eth(dst=...)),set(ipv4(ttl=62)),userspace(pid=0,controller(reason=1,dont_send=1,continuation=0,recirc_id=426,rule_cookie=0x6c61000000000000,controller_id=27745,max_len=65535))
//
// No output: OVS gives the packet to the agent, which rejects it.
const (
	// RejectControllerID is the OpenFlow controller id of the agent's
	// packet-in connection ("la"); packet-ins from controller(id=N) reach
	// only connections that set id N, so traces never see these.
	RejectControllerID = 0x6c61
	// PacketInCategoryNP and PacketInNPRejectOperation are Antrea's first
	// and second userdata bytes of a NetworkPolicy reject packet-in.
	PacketInCategoryNP        = 1
	PacketInNPRejectOperation = 0b10
	// rejectMark: OutputToController in reg0[21..22] and the reject
	// operation in reg0[25..31].
	rejectMark = "0x4400000/0xfe600000"
)

// RejectUserdata is the packet-in userdata of a reject, as Antrea writes it.
var RejectUserdata = []byte{PacketInCategoryNP, PacketInNPRejectOperation}

func rejectActions(table int) string {
	return fmt.Sprintf("set_field:%s->reg0,set_field:0x%x/0xff->reg2,%s", rejectMark, table, goTo(TableOutput))
}

func rejectOutputFlow() string {
	return f(TableOutput, 220, "reg0="+rejectMark,
		fmt.Sprintf("controller(id=%d,userdata=%02x.%02x)", RejectControllerID, PacketInCategoryNP, PacketInNPRejectOperation))
}

// IsReject says whether a packet-in's userdata asks for a reject.
func IsReject(userdata []byte) bool {
	return len(userdata) >= 2 && userdata[0] == PacketInCategoryNP && userdata[1]&PacketInNPRejectOperation != 0
}

// ErrNoReject says the packet is one a reject must not answer (an ICMP
// error, a RST, something not IPv4).
var ErrNoReject = errors.New("no reject for this packet")

// RejectReply builds the answer to a rejected packet (an Ethernet frame as
// the packet-in carried it) and says where to send it: the source pod's
// port when it is local, the tunnel to its node (with tun_dst), or else the
// gateway. actions is an OpenFlow action list in ovs-ofctl syntax.
func RejectReply(c Config, s State, frame []byte) (reply []byte, out Injection, err error) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if eth == nil || ip == nil {
		return nil, Injection{}, ErrNoReject
	}
	rip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, SrcIP: ip.DstIP, DstIP: ip.SrcIP}
	var l4 []gopacket.SerializableLayer
	switch ip.Protocol {
	case layers.IPProtocolTCP:
		tcp, _ := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if tcp == nil || tcp.RST {
			return nil, Injection{}, ErrNoReject
		}
		rip.Protocol = layers.IPProtocolTCP
		rst := &layers.TCP{SrcPort: tcp.DstPort, DstPort: tcp.SrcPort, RST: true, Window: 0}
		// RFC 793's reset generation: answer the ACK if there is one,
		// else acknowledge everything the segment occupied.
		if tcp.ACK {
			rst.Seq = tcp.Ack
		} else {
			rst.ACK = true
			rst.Ack = tcp.Seq + uint32(len(tcp.Payload))
			if tcp.SYN {
				rst.Ack++
			}
			if tcp.FIN {
				rst.Ack++
			}
		}
		if err := rst.SetNetworkLayerForChecksum(rip); err != nil {
			return nil, Injection{}, err
		}
		l4 = []gopacket.SerializableLayer{rst}
	default:
		if icmp, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); icmp != nil && icmp.TypeCode.Type() != layers.ICMPv4TypeEchoRequest {
			return nil, Injection{}, ErrNoReject // never answer an error with an error
		}
		code := uint8(layers.ICMPv4CodeCommAdminProhibited)
		if ip.Protocol == layers.IPProtocolUDP {
			code = layers.ICMPv4CodePort
		}
		rip.Protocol = layers.IPProtocolICMPv4
		// RFC 792: the offending IP header and the first 8 bytes of its
		// payload, enough for the source to find its socket.
		quoted := ip.Contents
		if n := len(ip.Payload); n > 0 {
			quoted = append(append([]byte{}, ip.Contents...), ip.Payload[:min(n, 8)]...)
		}
		l4 = []gopacket.SerializableLayer{
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, code)},
			gopacket.Payload(quoted),
		}
	}
	reth := &layers.Ethernet{SrcMAC: eth.DstMAC, DstMAC: eth.SrcMAC, EthernetType: layers.EthernetTypeIPv4}
	out, err = route(c, s, ip.SrcIP)
	if err != nil {
		return nil, Injection{}, err
	}
	// The packet-in carries the frame as the pipeline left it, with
	// L3Forwarding's MACs (the gateway as source), so the way back picks
	// its own: the pod's MAC from the gateway for a local pod, the virtual
	// MAC into the tunnel (the other node's L3Forwarding rewrites it).
	switch {
	case out.TunDst.IsValid():
		reth.DstMAC, _ = net.ParseMAC(GlobalVirtualMAC)
	case out.podMAC != "":
		reth.SrcMAC, _ = net.ParseMAC(c.GatewayMAC)
		reth.DstMAC, _ = net.ParseMAC(out.podMAC)
	}
	sb := gopacket.NewSerializeBuffer()
	err = gopacket.SerializeLayers(sb, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true},
		append([]gopacket.SerializableLayer{reth, rip}, l4...)...)
	return sb.Bytes(), out, err
}

// Injection is where a generated packet goes: out of OFPort, through the
// tunnel to TunDst when that is set.
type Injection struct {
	OFPort int
	TunDst netip.Addr
	podMAC string
}

func route(c Config, s State, dst net.IP) (Injection, error) {
	a, ok := netip.AddrFromSlice(dst.To4())
	if !ok {
		return Injection{}, ErrNoReject
	}
	for _, p := range s.Pods {
		if p.IP == a {
			return Injection{OFPort: p.OFPort, podMAC: p.MAC}, nil
		}
	}
	for _, n := range s.Nodes {
		if n.PodCIDR.Contains(a) {
			return Injection{OFPort: c.TunnelPort, TunDst: n.NodeIP}, nil
		}
	}
	if c.GatewayPort > 0 {
		return Injection{OFPort: c.GatewayPort}, nil
	}
	return Injection{}, fmt.Errorf("no way back to %s", a)
}
