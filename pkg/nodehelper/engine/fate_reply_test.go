package engine

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func frame(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	if _, ok := ls[0].(*layers.IPv6); ok {
		eth.EthernetType = layers.EthernetTypeIPv6
	}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, append([]gopacket.SerializableLayer{eth}, ls...)...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRejectAnswer(t *testing.T) {
	src, dst := netip.MustParseAddr("172.31.1.1"), netip.MustParseAddr("172.31.1.2")
	ip4 := func(from, to string, p layers.IPProtocol) *layers.IPv4 {
		return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: p, SrcIP: net.ParseIP(from), DstIP: net.ParseIP(to)}
	}
	quoted := func(to string) gopacket.Payload {
		b := gopacket.NewSerializeBuffer()
		_ = gopacket.SerializeLayers(b, gopacket.SerializeOptions{FixLengths: true}, ip4("172.31.1.1", to, layers.IPProtocolUDP), &layers.UDP{SrcPort: 4000, DstPort: 53})
		return gopacket.Payload(b.Bytes())
	}
	for name, tc := range map[string]struct {
		f    []byte
		want bool
	}{
		"RST from the destination": {frame(t, ip4("172.31.1.2", "172.31.1.1", layers.IPProtocolTCP), &layers.TCP{SrcPort: 80, DstPort: 40000, RST: true, ACK: true}), true},
		"SYN-ACK is no reject":     {frame(t, ip4("172.31.1.2", "172.31.1.1", layers.IPProtocolTCP), &layers.TCP{SrcPort: 80, DstPort: 40000, SYN: true, ACK: true}), false},
		"RST to someone else":      {frame(t, ip4("172.31.1.2", "172.31.1.9", layers.IPProtocolTCP), &layers.TCP{RST: true}), false},
		"port unreachable from a router": {frame(t, ip4("172.31.1.254", "172.31.1.1", layers.IPProtocolICMPv4),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}, quoted("172.31.1.2")), true},
		"unreachable for another packet": {frame(t, ip4("172.31.1.254", "172.31.1.1", layers.IPProtocolICMPv4),
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}, quoted("172.31.9.9")), false},
		"echo reply": {frame(t, ip4("172.31.1.2", "172.31.1.1", layers.IPProtocolICMPv4), &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(0, 0)}), false},
		"garbage":    {[]byte{1, 2, 3}, false},
	} {
		if got := RejectAnswer(tc.f, src, dst); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
