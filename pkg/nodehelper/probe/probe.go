// Package probe builds the probe packets that the helper injects: Ethernet
// frames carrying IPv4 or IPv6 with TCP, UDP, ICMP echo or ICMPv6 echo, the
// trace's DSCP tag in the IP header and correct checksums.
package probe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
)

// Protocol is the transport of a probe.
type Protocol string

// Protocols.
const (
	TCP  Protocol = "tcp"
	UDP  Protocol = "udp"
	ICMP Protocol = "icmp" // ICMP echo for IPv4, ICMPv6 echo for IPv6
)

// Spec is everything a probe packet is built from.
type Spec struct {
	SrcMAC, DstMAC net.HardwareAddr
	SrcIP, DstIP   netip.Addr
	Protocol       Protocol
	SrcPort        uint16
	DstPort        uint16
	// TCPFlags is the TCP flags byte as sent: FIN 0x01, SYN 0x02, RST 0x04,
	// PSH 0x08, ACK 0x10, URG 0x20, ECE 0x40, CWR 0x80. Zero sends no flag
	// at all (a null scan), never a silent SYN: the caller picks SYN.
	TCPFlags uint8
	// Tag marks the probe: a DSCP value, and an ECN codepoint where
	// traces share it (dscp.Tag).
	Tag uint8
	// Mark is the trace's own value for the IPv4 identification (its low
	// 16 bits) or the IPv6 flow label (20 bits); 0 means Mark(Tag).
	Mark uint32
	// TTL (hop limit); 0 means 64.
	TTL uint8
	// ICMPID and ICMPSeq identify an echo request.
	ICMPID, ICMPSeq uint16
}

// Build returns the probe frame.
func Build(s Spec) ([]byte, error) {
	if !s.SrcIP.IsValid() || !s.DstIP.IsValid() {
		return nil, errors.New("probe: source and destination IP are required")
	}
	if s.SrcIP.Is4() != s.DstIP.Is4() {
		return nil, fmt.Errorf("probe: source %s and destination %s are of different IP families", s.SrcIP, s.DstIP)
	}
	if !dscp.ValidTag(s.Tag) {
		return nil, fmt.Errorf("probe: tag %d out of range %s", s.Tag, dscp.TagRange)
	}
	ttl := s.TTL
	if ttl == 0 {
		ttl = 64
	}
	if len(s.SrcMAC) != 6 || len(s.DstMAC) != 6 {
		return nil, errors.New("probe: source and destination MAC are required")
	}
	eth := &layers.Ethernet{SrcMAC: s.SrcMAC, DstMAC: s.DstMAC}
	var ip gopacket.NetworkLayer
	var ipLayer gopacket.SerializableLayer
	v6 := s.DstIP.Is6() && !s.DstIP.Is4In6()
	if v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
		l := &layers.IPv6{Version: 6, TrafficClass: dscp.TOS(s.Tag), HopLimit: ttl, FlowLabel: markOr(s.Mark, s.Tag),
			SrcIP: s.SrcIP.AsSlice(), DstIP: s.DstIP.AsSlice()}
		ip, ipLayer = l, l
	} else {
		eth.EthernetType = layers.EthernetTypeIPv4
		l := &layers.IPv4{Version: 4, IHL: 5, TOS: dscp.TOS(s.Tag), TTL: ttl, Flags: layers.IPv4DontFragment, Id: uint16(markOr(s.Mark, s.Tag)), //nolint:gosec // the low 16 bits
			SrcIP: s.SrcIP.Unmap().AsSlice(), DstIP: s.DstIP.Unmap().AsSlice()}
		ip, ipLayer = l, l
	}
	var l4 []gopacket.SerializableLayer
	switch s.Protocol {
	case TCP:
		t := &layers.TCP{SrcPort: layers.TCPPort(s.SrcPort), DstPort: layers.TCPPort(s.DstPort), Seq: 1, Window: 64240}
		f := s.TCPFlags
		t.FIN, t.SYN, t.RST, t.PSH, t.ACK, t.URG = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0, f&16 != 0, f&32 != 0
		t.ECE, t.CWR = f&0x40 != 0, f&0x80 != 0
		if err := t.SetNetworkLayerForChecksum(ip); err != nil {
			return nil, err
		}
		setProto(ipLayer, layers.IPProtocolTCP)
		l4 = append(l4, t)
	case UDP:
		u := &layers.UDP{SrcPort: layers.UDPPort(s.SrcPort), DstPort: layers.UDPPort(s.DstPort)}
		if err := u.SetNetworkLayerForChecksum(ip); err != nil {
			return nil, err
		}
		setProto(ipLayer, layers.IPProtocolUDP)
		l4 = append(l4, u, gopacket.Payload("traceflow"))
	case ICMP:
		if v6 {
			ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}
			if err := ic.SetNetworkLayerForChecksum(ip); err != nil {
				return nil, err
			}
			setProto(ipLayer, layers.IPProtocolICMPv6)
			l4 = append(l4, ic, &layers.ICMPv6Echo{Identifier: s.ICMPID, SeqNumber: s.ICMPSeq})
		} else {
			setProto(ipLayer, layers.IPProtocolICMPv4)
			l4 = append(l4, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0),
				Id: s.ICMPID, Seq: s.ICMPSeq})
		}
	default:
		return nil, fmt.Errorf("probe: unknown protocol %q (tcp, udp or icmp)", s.Protocol)
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, append([]gopacket.SerializableLayer{eth, ipLayer}, l4...)...); err != nil {
		return nil, fmt.Errorf("probe: serialize: %w", err)
	}
	return buf.Bytes(), nil
}

func setProto(l gopacket.SerializableLayer, p layers.IPProtocol) {
	switch ip := l.(type) {
	case *layers.IPv4:
		ip.Protocol = p
	case *layers.IPv6:
		ip.NextHeader = p
	}
}

// Mark is the value a probe with tag carries in its IPv4 identification
// (low 16 bits) or IPv6 flow label (20 bits). The tag alone does not tell
// the probe from its reply: Linux may reflect the DSCP of a SYN into the
// SYN-ACK. NAT keeps both fields, a reply's are the replier's own.
// A helper run by the plugin is given a random mark per trace instead
// (--mark), so that a pod cannot forge a packet the helper counts as the
// probe by knowing the tag alone.
func Mark(tag uint8) uint32 { return 0x54000 | uint32(tag)<<6 | 0x2a }

// MaxMark is the largest mark: an IPv6 flow label has 20 bits.
const MaxMark = 0xfffff

func markOr(mark uint32, tag uint8) uint32 {
	if mark == 0 {
		return Mark(tag)
	}
	return mark & MaxMark
}

// Summary is what the helper reads back from a packet it observed.
type Summary struct {
	SrcMAC, DstMAC net.HardwareAddr
	SrcIP, DstIP   netip.Addr
	// Tag is the tag the traffic class byte stands for (dscp.FromTOS):
	// its DSCP value (dscp.Value) and ECN codepoint.
	Tag uint8
	TTL uint8
	// Mark is the IPv4 identification or the IPv6 flow label.
	Mark uint32
	// SrcPort is the TCP or UDP source port; ICMPEcho is true for an echo request.
	SrcPort  uint16
	ICMPEcho bool
}

// IsProbe reports whether a packet is the probe with tag and mark (0:
// Mark(tag)): its DSCP value, ECN codepoint and mark say so, and (for TCP and UDP) its
// source port is the probe's.
func (s Summary) IsProbe(tag uint8, mark uint32, srcPort uint16) bool {
	want := markOr(mark, tag)
	if s.SrcIP.Is4() {
		want &= 0xffff
	}
	if s.Tag != tag || s.Mark != want {
		return false
	}
	return srcPort == 0 || s.SrcPort == srcPort || s.ICMPEcho
}

// Decode reads the Ethernet and IP header of a frame.
func Decode(frame []byte) (Summary, error) {
	var s Summary
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	eth, ok := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if !ok {
		return s, errors.New("not an Ethernet frame")
	}
	s.SrcMAC, s.DstMAC = eth.SrcMAC, eth.DstMAC
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		s.SrcIP, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		s.DstIP, _ = netip.AddrFromSlice(ip.DstIP.To4())
		s.Tag, s.TTL, s.Mark = dscp.FromTOS(ip.TOS), ip.TTL, uint32(ip.Id)
	case *layers.IPv6:
		s.SrcIP, _ = netip.AddrFromSlice(ip.SrcIP)
		s.DstIP, _ = netip.AddrFromSlice(ip.DstIP)
		s.Tag, s.TTL, s.Mark = dscp.FromTOS(ip.TrafficClass), ip.HopLimit, ip.FlowLabel
	default:
		return s, errors.New("not an IP packet")
	}
	switch l4 := p.TransportLayer().(type) {
	case *layers.TCP:
		s.SrcPort = uint16(l4.SrcPort)
	case *layers.UDP:
		s.SrcPort = uint16(l4.SrcPort)
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
		s.ICMPEcho = ic.TypeCode.Type() == layers.ICMPv4TypeEchoRequest
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		s.ICMPEcho = ic.TypeCode.Type() == layers.ICMPv6TypeEchoRequest
	}
	return s, nil
}

// WithTag returns a copy of an IPv4 or IPv6 frame carrying tag instead
// of its own (its DSCP value and ECN codepoint; the IPv4 header checksum
// fixed); tag 0 is an untagged packet, for tracing the probe's path as
// one would take it.
func WithTag(frame []byte, tag uint8) []byte {
	tos := dscp.TOS(tag)
	f := append([]byte(nil), frame...)
	if len(f) < 14 {
		return f
	}
	switch uint16(f[12])<<8 | uint16(f[13]) {
	case 0x0800:
		if len(f) < 34 {
			return f
		}
		ip := f[14:]
		ihl := int(ip[0]&0x0f) * 4
		if ihl < 20 || len(ip) < ihl {
			return f
		}
		ip[1] = tos
		ip[10], ip[11] = 0, 0
		var s uint32
		for i := 0; i < ihl; i += 2 {
			s += uint32(ip[i])<<8 | uint32(ip[i+1])
		}
		for s>>16 != 0 {
			s = s&0xffff + s>>16
		}
		ip[10], ip[11] = byte(^s>>8), byte(^s)
	case 0x86dd:
		if len(f) < 54 {
			return f
		}
		ip := f[14:]
		tc := tos
		ip[0] = ip[0]&0xf0 | tc>>4
		ip[1] = ip[1]&0x0f | tc<<4
	}
	return f
}

// TraceFlow writes a frame's headers in ofproto/trace's flow syntax
// (without in_port or other metadata). The helper traces this description
// rather than the packet itself: given a packet, ofproto/trace in OVS 3.1
// commits conntrack entries of a select group's ct(commit,nat) buckets,
// which then change what the real probe finds in conntrack.
func TraceFlow(frame []byte) (string, error) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	eth, ok := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if !ok {
		return "", errors.New("not an Ethernet frame")
	}
	var b strings.Builder
	proto := ""
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		switch ip.Protocol {
		case layers.IPProtocolTCP:
			proto = "tcp"
		case layers.IPProtocolUDP:
			proto = "udp"
		case layers.IPProtocolICMPv4:
			proto = "icmp"
		default:
			proto = fmt.Sprintf("ip,nw_proto=%d", ip.Protocol)
		}
		fmt.Fprintf(&b, "%s,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_tos=%d,nw_ecn=%d,nw_ttl=%d",
			proto, eth.SrcMAC, eth.DstMAC, ip.SrcIP, ip.DstIP, ip.TOS&^3, ip.TOS&3, ip.TTL)
	case *layers.IPv6:
		switch ip.NextHeader {
		case layers.IPProtocolTCP:
			proto = "tcp6"
		case layers.IPProtocolUDP:
			proto = "udp6"
		case layers.IPProtocolICMPv6:
			proto = "icmp6"
		default:
			proto = fmt.Sprintf("ipv6,nw_proto=%d", ip.NextHeader)
		}
		fmt.Fprintf(&b, "%s,dl_src=%s,dl_dst=%s,ipv6_src=%s,ipv6_dst=%s,ipv6_label=%#x,nw_tos=%d,nw_ecn=%d,nw_ttl=%d",
			proto, eth.SrcMAC, eth.DstMAC, ip.SrcIP, ip.DstIP, ip.FlowLabel, ip.TrafficClass&^3, ip.TrafficClass&3, ip.HopLimit)
	default:
		return "", errors.New("not an IP packet")
	}
	switch l4 := p.TransportLayer().(type) {
	case *layers.TCP:
		var f uint8
		// OVS's tcp_flags has the same bit order as the header byte
		// (ECE 0x40, CWR 0x80), so the probe's flags go through unchanged.
		for i, set := range []bool{l4.FIN, l4.SYN, l4.RST, l4.PSH, l4.ACK, l4.URG, l4.ECE, l4.CWR} {
			if set {
				f |= 1 << i
			}
		}
		// tcp_src/udp_src: OVS 3.1's trace parser rejects tp_src after "udp".
		fmt.Fprintf(&b, ",tcp_src=%d,tcp_dst=%d,tcp_flags=%#x", l4.SrcPort, l4.DstPort, f)
	case *layers.UDP:
		fmt.Fprintf(&b, ",udp_src=%d,udp_dst=%d", l4.SrcPort, l4.DstPort)
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
		fmt.Fprintf(&b, ",icmp_type=%d,icmp_code=%d", ic.TypeCode.Type(), ic.TypeCode.Code())
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		fmt.Fprintf(&b, ",icmpv6_type=%d,icmpv6_code=%d", ic.TypeCode.Type(), ic.TypeCode.Code())
	}
	return b.String(), nil
}
