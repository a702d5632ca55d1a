package traceflow

import (
	"fmt"
	"strings"
)

// DescribePacket says in words what probe s asks for: "TCP port 80, flags
// SYN, IPv4 TTL 64".
func DescribePacket(s Spec) string {
	p := s.Packet
	var parts []string
	th := p.TransportHeader
	switch {
	case th.TCP != nil:
		parts = append(parts, fmt.Sprintf("TCP port %d", th.TCP.DstPort))
		if th.TCP.SrcPort != 0 {
			parts = append(parts, fmt.Sprintf("from port %d", th.TCP.SrcPort))
		}
		if th.TCP.Flags != nil {
			parts = append(parts, "flags "+FormatTCPFlags(*th.TCP.Flags))
		}
	case th.UDP != nil:
		parts = append(parts, fmt.Sprintf("UDP port %d", th.UDP.DstPort))
		if th.UDP.SrcPort != 0 {
			parts = append(parts, fmt.Sprintf("from port %d", th.UDP.SrcPort))
		}
	default:
		parts = append(parts, "ICMP echo request")
	}
	if p.IPv6Header != nil {
		parts = append(parts, fmt.Sprintf("IPv6 hop limit %d", p.IPv6Header.HopLimit))
	} else if p.IPHeader != nil {
		parts = append(parts, fmt.Sprintf("IPv4 TTL %d", p.IPHeader.TTL))
	}
	return strings.Join(parts, ", ")
}
