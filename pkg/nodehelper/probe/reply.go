package probe

import (
	"net/netip"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// ReplyTo says which probe an answer must answer: the probe's source
// address, protocol and source port (TCP, UDP) or echo identifier (ICMP),
// and its mark, which an ICMP error quotes in the probe's own header.
type ReplyTo struct {
	Source   netip.Addr
	Protocol Protocol
	SrcPort  uint16
	ICMPID   uint16
	// Mark is the probe's IPv4 identification or IPv6 flow label as sent.
	Mark uint32
	// AnyAddress: the answer may come to another address than Source
	// (the probe's source is translated on its way, as a gateway router
	// translates a packet from outside the cluster to a NodePort): the
	// answer is known by its ports, identifier and mark alone.
	AnyAddress bool
	// From, where valid, is the only address an answer other than an
	// ICMP error may come from: the probe's destination, which nothing
	// translated (an address outside the cluster, answering a probe
	// whose source the pipeline translated on its way out).
	From netip.Addr
}

// Answers reports whether frame answers the probe r describes, and how.
// A TCP answer must acknowledge the probe's SYN (sequence 1, so ack 2),
// an echo reply carry the probe's identifier, and an ICMP error quote the
// probe's own header (its source, source port or identifier, and mark):
// a packet to the same port that answers something else is not the
// answer.
func (r ReplyTo) Answers(frame []byte) (report.Answer, bool) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	var dst, src netip.Addr
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
	case *layers.IPv6:
		dst, _ = netip.AddrFromSlice(ip.DstIP)
		src, _ = netip.AddrFromSlice(ip.SrcIP)
	default:
		return report.Answer{}, false
	}
	if dst != r.Source && !r.AnyAddress {
		return report.Answer{}, false
	}
	a, ok := r.answer(p)
	if r.From.IsValid() && src != r.From && !strings.HasPrefix(a.Kind, "ICMP") {
		ok = false
	}
	a.From = src.String()
	return a, ok
}

func (r ReplyTo) answer(p gopacket.Packet) (report.Answer, bool) {
	if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
		switch ic.TypeCode.Type() {
		case layers.ICMPv4TypeEchoReply:
			return report.Answer{Kind: "echo reply"}, r.Protocol == ICMP && ic.Id == r.ICMPID
		case layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4TypeTimeExceeded:
			return report.Answer{Kind: "ICMP " + ic.TypeCode.String(), Refused: true}, r.quotes(ic.Payload, false)
		}
		return report.Answer{}, false
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		switch ic.TypeCode.Type() {
		case layers.ICMPv6TypeEchoReply:
			echo, ok := p.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo)
			return report.Answer{Kind: "echo reply"}, ok && r.Protocol == ICMP && echo.Identifier == r.ICMPID
		case layers.ICMPv6TypeDestinationUnreachable, layers.ICMPv6TypeTimeExceeded:
			// ICMPv6's payload starts after 4 unused bytes.
			body := ic.Payload
			if len(body) >= 4 {
				body = body[4:]
			}
			return report.Answer{Kind: "ICMPv6 " + ic.TypeCode.String(), Refused: true}, r.quotes(body, true)
		}
		return report.Answer{}, false
	}
	switch l4 := p.TransportLayer().(type) {
	case *layers.TCP:
		ok := r.Protocol == TCP && uint16(l4.DstPort) == r.SrcPort && l4.ACK && l4.Ack == 2
		switch {
		case l4.RST:
			return report.Answer{Kind: "RST", Refused: true}, ok
		case l4.SYN:
			return report.Answer{Kind: "SYN-ACK"}, ok
		case l4.ACK:
			// A destination that still holds an earlier connection on
			// these ports (its TIME_WAIT) answers the SYN with an ACK of
			// that connection: an answer all the same, back on the same
			// path, whatever it acknowledges.
			return report.Answer{Kind: "ACK of an earlier connection on these ports"},
				r.Protocol == TCP && uint16(l4.DstPort) == r.SrcPort
		}
		return report.Answer{Kind: "TCP"}, false
	case *layers.UDP:
		return report.Answer{Kind: "UDP"}, r.Protocol == UDP && uint16(l4.DstPort) == r.SrcPort
	}
	return report.Answer{}, false
}

// quotes reports whether an ICMP error's body (the offending packet's IP
// header and the first bytes after it) is the probe's.
func (r ReplyTo) quotes(body []byte, v6 bool) bool {
	var inner gopacket.Packet
	if v6 {
		inner = gopacket.NewPacket(body, layers.LayerTypeIPv6, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	} else {
		inner = gopacket.NewPacket(body, layers.LayerTypeIPv4, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	}
	var src netip.Addr
	var mark uint32
	var l4 []byte
	switch ip := inner.NetworkLayer().(type) {
	case *layers.IPv4:
		src, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		mark, l4 = uint32(ip.Id), ip.Payload
	case *layers.IPv6:
		src, _ = netip.AddrFromSlice(ip.SrcIP)
		mark, l4 = ip.FlowLabel, ip.Payload
	default:
		return false
	}
	want := r.Mark
	if !v6 {
		want &= 0xffff
	}
	if (src != r.Source && !r.AnyAddress) || mark != want || len(l4) < 6 {
		return false
	}
	if r.Protocol == ICMP {
		// The echo request's identifier follows type, code and checksum.
		return uint16(l4[4])<<8|uint16(l4[5]) == r.ICMPID
	}
	return uint16(l4[0])<<8|uint16(l4[1]) == r.SrcPort
}

// Reply says which answers answer the probe s builds.
func (s Spec) Reply() ReplyTo {
	r := ReplyTo{Source: s.SrcIP, Protocol: s.Protocol, Mark: markOr(s.Mark, s.Tag)}
	if s.Protocol == ICMP {
		r.ICMPID = s.ICMPID
	} else {
		r.SrcPort = s.SrcPort
	}
	return r
}

// ReplyToFrame says which answers answer the probe frame is: a receiver
// knows the probe only from the packet it caught.
func ReplyToFrame(frame []byte) (ReplyTo, bool) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	var r ReplyTo
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		r.Source, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		r.Mark = uint32(ip.Id)
	case *layers.IPv6:
		r.Source, _ = netip.AddrFromSlice(ip.SrcIP)
		r.Mark = ip.FlowLabel
	default:
		return r, false
	}
	switch l4 := p.TransportLayer().(type) {
	case *layers.TCP:
		r.Protocol, r.SrcPort = TCP, uint16(l4.SrcPort)
		return r, true
	case *layers.UDP:
		r.Protocol, r.SrcPort = UDP, uint16(l4.SrcPort)
		return r, true
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok && ic.TypeCode.Type() == layers.ICMPv4TypeEchoRequest {
		r.Protocol, r.ICMPID = ICMP, ic.Id
		return r, true
	}
	if echo, ok := p.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo); ok {
		r.Protocol, r.ICMPID = ICMP, echo.Identifier
		return r, true
	}
	return r, false
}
