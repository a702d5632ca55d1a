package probe

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// answerFromTo serializes the layers after an IP header from src to dst.
func answerFromTo(t *testing.T, src, dst netip.Addr, proto layers.IPProtocol, l4 ...gopacket.SerializableLayer) []byte {
	t.Helper()
	var ip gopacket.NetworkLayer
	var ipl gopacket.SerializableLayer
	ethType := layers.EthernetTypeIPv4
	if dst.Is4() {
		v4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		ip, ipl = v4, v4
	} else {
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		ip, ipl, ethType = v6, v6, layers.EthernetTypeIPv6
	}
	for _, l := range l4 {
		if c, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			_ = c.SetNetworkLayerForChecksum(ip)
		}
	}
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{SrcMAC: macB, DstMAC: macA, EthernetType: ethType}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		append([]gopacket.SerializableLayer{eth, ipl}, l4...)...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// quote6 is an IPv6 probe's header and the 8 bytes after it, behind the 4
// unused bytes that start an ICMPv6 error's body.
func quote6(t *testing.T, s Spec) []byte {
	t.Helper()
	f, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return append(make([]byte, 4), f[14:14+40+8]...)
}

// A probe whose source the pipeline translated on its way out (a gateway
// router's SNAT, to 172.18.0.3 and a port it picked) is answered by its
// destination alone: with From, a SYN-ACK, echo reply or UDP answer to the
// translated address and port from any other address is not the answer,
// where without From it is. An ICMP error comes from a router on the way,
// not the destination: From does not apply to it.
func TestAnswersFrom(t *testing.T) {
	dst, other, router := netip.MustParseAddr("10.10.1.3"), netip.MustParseAddr("10.10.1.99"), netip.MustParseAddr("172.18.0.1")
	translated := netip.MustParseAddr("172.18.0.3")
	snat := func(p Protocol) Spec {
		s := probeSpec(p)
		s.SrcIP, s.SrcPort, s.ICMPID = translated, 40001, 0x4242
		return s
	}
	tcp, udp, icmp := snat(TCP), snat(UDP), snat(ICMP)
	tcp6 := tcp
	tcp6.SrcIP, tcp6.DstIP = netip.MustParseAddr("fd00:64::3"), netip.MustParseAddr("fd00:10::3")
	udp6 := udp
	udp6.SrcIP, udp6.DstIP = tcp6.SrcIP, tcp6.DstIP
	other6, router6 := netip.MustParseAddr("fd00:10::99"), netip.MustParseAddr("fd00:64::1")
	synAck := &layers.TCP{SrcPort: 80, DstPort: 40001, SYN: true, ACK: true, Ack: 2}
	rst := &layers.TCP{SrcPort: 80, DstPort: 40001, RST: true, ACK: true, Ack: 2}
	echoReply := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(0, 0), Id: 0x4242, Seq: 1}
	udpAnswer := &layers.UDP{SrcPort: 80, DstPort: 40001}
	unreachable := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}
	unreachable6 := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(1, 4)}
	for _, tc := range []struct {
		name          string
		spec          Spec
		frame         []byte
		with, without bool
		kind, from    string
	}{
		{"SYN-ACK from the destination", tcp, answerFromTo(t, dst, translated, layers.IPProtocolTCP, synAck), true, true, "SYN-ACK", "10.10.1.3"},
		{"SYN-ACK from another address", tcp, answerFromTo(t, other, translated, layers.IPProtocolTCP, synAck), false, true, "SYN-ACK", "10.10.1.99"},
		{"RST from another address", tcp, answerFromTo(t, other, translated, layers.IPProtocolTCP, rst), false, true, "RST", "10.10.1.99"},
		{"echo reply from the destination", icmp, answerFromTo(t, dst, translated, layers.IPProtocolICMPv4, echoReply), true, true, "echo reply", "10.10.1.3"},
		{"echo reply from another address", icmp, answerFromTo(t, other, translated, layers.IPProtocolICMPv4, echoReply), false, true, "echo reply", "10.10.1.99"},
		{"UDP answer from the destination", udp, answerFromTo(t, dst, translated, layers.IPProtocolUDP, udpAnswer), true, true, "UDP", "10.10.1.3"},
		{"UDP answer from another address", udp, answerFromTo(t, other, translated, layers.IPProtocolUDP, udpAnswer), false, true, "UDP", "10.10.1.99"},
		{"port unreachable from a router quoting the probe", udp,
			answerFromTo(t, router, translated, layers.IPProtocolICMPv4, unreachable, gopacket.Payload(quote(t, udp))), true, true,
			"ICMP DestinationUnreachable(Port)", "172.18.0.1"},
		{"port unreachable from the destination quoting the probe", udp,
			answerFromTo(t, dst, translated, layers.IPProtocolICMPv4, unreachable, gopacket.Payload(quote(t, udp))), true, true,
			"ICMP DestinationUnreachable(Port)", "10.10.1.3"},
		{"IPv6 SYN-ACK from another address", tcp6, answerFromTo(t, other6, tcp6.SrcIP, layers.IPProtocolTCP, synAck), false, true, "SYN-ACK", "fd00:10::99"},
		{"IPv6 port unreachable from a router quoting the probe", udp6,
			answerFromTo(t, router6, udp6.SrcIP, layers.IPProtocolICMPv6, unreachable6, gopacket.Payload(quote6(t, udp6))), true, true,
			"ICMPv6 DestinationUnreachable(PortUnreachable)", "fd00:64::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to := tc.spec.Reply()
			if a, ok := to.Answers(tc.frame); ok != tc.without || (ok && (a.Kind != tc.kind || a.From != tc.from)) {
				t.Errorf("without From: Answers = %+v, %v; want kind %q from %s, %v", a, ok, tc.kind, tc.from, tc.without)
			}
			to.From = tc.spec.DstIP
			a, ok := to.Answers(tc.frame)
			if ok != tc.with || a.Kind != tc.kind || a.From != tc.from {
				t.Errorf("with From %s: Answers = %+v, %v; want kind %q from %s, %v", to.From, a, ok, tc.kind, tc.from, tc.with)
			}
		})
	}
}
