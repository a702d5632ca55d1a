package engine

import (
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// RejectAnswer reports whether frame answers a probe sent from src to dst
// with a reject: a TCP RST from dst to src, or an ICMP (ICMPv6) destination
// unreachable sent to src that quotes a packet for dst. An agent that
// rejects on a packet-in, or a pipeline that rewrites the packet into its
// own answer, sends one back toward the source: seeing it is the observed
// form of a reject, where the controller action was the predicted one. The
// answer may come from any address (a router's ICMP), so only the quoted
// packet has to name dst.
func RejectAnswer(frame []byte, src, dst netip.Addr) bool {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	var from, to netip.Addr
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		from, _ = netip.AddrFromSlice(ip.SrcIP.To4())
		to, _ = netip.AddrFromSlice(ip.DstIP.To4())
	case *layers.IPv6:
		from, _ = netip.AddrFromSlice(ip.SrcIP)
		to, _ = netip.AddrFromSlice(ip.DstIP)
	default:
		return false
	}
	if to != src {
		return false
	}
	if tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
		return tcp.RST && from == dst
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
		return ic.TypeCode.Type() == layers.ICMPv4TypeDestinationUnreachable && quotes(ic.Payload, dst, layers.LayerTypeIPv4)
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		// ICMPv6 keeps 4 unused bytes before the quoted packet.
		return ic.TypeCode.Type() == layers.ICMPv6TypeDestinationUnreachable && len(ic.Payload) > 4 &&
			quotes(ic.Payload[4:], dst, layers.LayerTypeIPv6)
	}
	return false
}

// quotes reports whether an ICMP error's payload is a packet for dst.
func quotes(b []byte, dst netip.Addr, lt gopacket.LayerType) bool {
	q := gopacket.NewPacket(b, lt, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	switch ip := q.NetworkLayer().(type) {
	case *layers.IPv4:
		a, _ := netip.AddrFromSlice(ip.DstIP.To4())
		return a == dst
	case *layers.IPv6:
		a, _ := netip.AddrFromSlice(ip.DstIP)
		return a == dst
	}
	return false
}
