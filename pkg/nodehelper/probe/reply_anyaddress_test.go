package probe

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// answerTo serializes the layers after an IP header from the probe's
// destination (10.10.1.3, or fd00:10::3 for an IPv6 dst) to dst.
func answerTo(t *testing.T, dst netip.Addr, proto layers.IPProtocol, l4 ...gopacket.SerializableLayer) []byte {
	t.Helper()
	src := netip.MustParseAddr("10.10.1.3")
	if dst.Is6() {
		src = netip.MustParseAddr("fd00:10::3")
	}
	return answerFromTo(t, src, dst, proto, l4...)
}

// An answer to the probe's translated source (the gateway router's SNAT
// of a packet from outside) is the probe's answer only where the reply
// may come to any address; its ports, identifier and mark still decide.
func TestAnswersAnyAddress(t *testing.T) {
	translated := netip.MustParseAddr("100.64.0.4")
	tcp, udp, icmp := probeSpec(TCP), probeSpec(UDP), probeSpec(ICMP)
	snatUDP := udp
	snatUDP.SrcIP = translated
	snatOther := snatUDP
	snatOther.Mark = 0x999
	tcp6 := tcp
	tcp6.SrcIP, tcp6.DstIP = netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00:10::3")
	synAck := func(port layers.TCPPort, ack uint32) *layers.TCP {
		return &layers.TCP{SrcPort: 80, DstPort: port, SYN: true, ACK: true, Ack: ack}
	}
	unreachable := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}
	for _, tc := range []struct {
		name          string
		spec          Spec
		frame         []byte
		without, with bool
		kind          string
	}{
		{"SYN-ACK to the translated source", tcp, answerTo(t, translated, layers.IPProtocolTCP, synAck(50123, 2)), false, true, "SYN-ACK"},
		{"SYN-ACK to the source", tcp, answerTo(t, tcp.SrcIP, layers.IPProtocolTCP, synAck(50123, 2)), true, true, "SYN-ACK"},
		{"SYN-ACK to another port", tcp, answerTo(t, translated, layers.IPProtocolTCP, synAck(50124, 2)), false, false, "SYN-ACK"},
		{"SYN-ACK to another SYN", tcp, answerTo(t, translated, layers.IPProtocolTCP, synAck(50123, 900)), false, false, "SYN-ACK"},
		{"IPv6 SYN-ACK to another address", tcp6, answerTo(t, netip.MustParseAddr("fd00:64::4"), layers.IPProtocolTCP, synAck(50123, 2)), false, true, "SYN-ACK"},
		{"unreachable quoting the translated probe", udp, answerTo(t, translated, layers.IPProtocolICMPv4, unreachable, gopacket.Payload(quote(t, snatUDP))),
			false, true, "ICMP DestinationUnreachable(Port)"},
		{"unreachable to the source quoting the translated probe", udp, answerTo(t, udp.SrcIP, layers.IPProtocolICMPv4, unreachable, gopacket.Payload(quote(t, snatUDP))),
			false, true, "ICMP DestinationUnreachable(Port)"},
		{"unreachable quoting another translated packet", udp, answerTo(t, translated, layers.IPProtocolICMPv4, unreachable, gopacket.Payload(quote(t, snatOther))),
			false, false, "ICMP DestinationUnreachable(Port)"},
		{"echo reply to the translated source", icmp, answerTo(t, translated, layers.IPProtocolICMPv4, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(0, 0), Id: 0x77, Seq: 1}),
			false, true, "echo reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to := tc.spec.Reply()
			if _, ok := to.Answers(tc.frame); ok != tc.without {
				t.Errorf("without AnyAddress: Answers = %v, want %v", ok, tc.without)
			}
			to.AnyAddress = true
			a, ok := to.Answers(tc.frame)
			if ok != tc.with || (ok && a.Kind != tc.kind) {
				t.Errorf("with AnyAddress: Answers = %+v, %v; want kind %q, %v", a, ok, tc.kind, tc.with)
			}
			if want := tc.spec.DstIP.String(); ok && a.From != want {
				t.Errorf("From %q, want %s", a.From, want)
			}
		})
	}
}
