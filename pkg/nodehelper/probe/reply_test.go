package probe

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

func probeSpec(p Protocol) Spec {
	return Spec{SrcMAC: macA, DstMAC: macB, SrcIP: netip.MustParseAddr("10.10.0.2"), DstIP: netip.MustParseAddr("10.10.1.3"),
		Protocol: p, SrcPort: 50123, DstPort: 80, TCPFlags: 2, Tag: 9, Mark: 0x1234, ICMPID: 0x77, ICMPSeq: 1}
}

// answerFrame serializes the layers after an IPv4 header from 10.10.1.3
// to 10.10.0.2.
func answerFrame(t *testing.T, proto layers.IPProtocol, l4 ...gopacket.SerializableLayer) []byte {
	t.Helper()
	return answerFromTo(t, netip.MustParseAddr("10.10.1.3"), netip.MustParseAddr("10.10.0.2"), proto, l4...)
}

// quote is the probe's IP header and the 8 bytes after it, as an ICMP
// error carries them.
func quote(t *testing.T, s Spec) []byte {
	t.Helper()
	f, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return f[14 : 14+20+8]
}

func TestAnswers(t *testing.T) {
	tcp := probeSpec(TCP)
	udp := probeSpec(UDP)
	icmp := probeSpec(ICMP)
	other := probeSpec(UDP)
	other.Mark = 0x999
	cases := []struct {
		name    string
		spec    Spec
		frame   []byte
		want    bool
		kind    string
		refused bool
	}{
		{"SYN-ACK", tcp, answerFrame(t, layers.IPProtocolTCP, &layers.TCP{SrcPort: 80, DstPort: 50123, SYN: true, ACK: true, Ack: 2}), true, "SYN-ACK", false},
		{"RST", tcp, answerFrame(t, layers.IPProtocolTCP, &layers.TCP{SrcPort: 80, DstPort: 50123, RST: true, ACK: true, Ack: 2}), true, "RST", true},
		{"SYN-ACK to another SYN", tcp, answerFrame(t, layers.IPProtocolTCP, &layers.TCP{SrcPort: 80, DstPort: 50123, SYN: true, ACK: true, Ack: 900}), false, "SYN-ACK", false},
		{"TIME_WAIT's ACK", tcp, answerFrame(t, layers.IPProtocolTCP, &layers.TCP{SrcPort: 80, DstPort: 50123, ACK: true, Ack: 77777}), true, "ACK of an earlier connection on these ports", false},
		{"another port", tcp, answerFrame(t, layers.IPProtocolTCP, &layers.TCP{SrcPort: 80, DstPort: 50124, SYN: true, ACK: true, Ack: 2}), false, "SYN-ACK", false},
		{"UDP answer", udp, answerFrame(t, layers.IPProtocolUDP, &layers.UDP{SrcPort: 80, DstPort: 50123}), true, "UDP", false},
		{"UDP to TCP probe", tcp, answerFrame(t, layers.IPProtocolUDP, &layers.UDP{SrcPort: 80, DstPort: 50123}), false, "UDP", false},
		{"echo reply", icmp, answerFrame(t, layers.IPProtocolICMPv4, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(0, 0), Id: 0x77, Seq: 1}), true, "echo reply", false},
		{"echo reply to another ping", icmp, answerFrame(t, layers.IPProtocolICMPv4, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(0, 0), Id: 0x78, Seq: 1}), false, "echo reply", false},
		{"port unreachable", udp, answerFrame(t, layers.IPProtocolICMPv4, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}, gopacket.Payload(quote(t, udp))), true, "ICMP DestinationUnreachable(Port)", true},
		{"unreachable quoting another packet", udp, answerFrame(t, layers.IPProtocolICMPv4, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}, gopacket.Payload(quote(t, other))), false, "ICMP DestinationUnreachable(Port)", true},
		{"unreachable for a ping", icmp, answerFrame(t, layers.IPProtocolICMPv4, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 1)}, gopacket.Payload(quote(t, icmp))), true, "ICMP DestinationUnreachable(Host)", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ok := c.spec.Reply().Answers(c.frame)
			if ok != c.want || a.Kind != c.kind || a.Refused != c.refused {
				t.Errorf("Answers = %+v, %v; want kind %q refused %v, %v", a, ok, c.kind, c.refused, c.want)
			}
			if ok && a.From != "10.10.1.3" {
				t.Errorf("From %q, want 10.10.1.3", a.From)
			}
		})
	}
}

func TestReplyToFrameIsTheSpecsReply(t *testing.T) {
	for _, p := range []Protocol{TCP, UDP, ICMP} {
		s := probeSpec(p)
		s.Mark = 0
		f, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := ReplyToFrame(f)
		want := s.Reply()
		want.Mark &= 0xffff
		if !ok || got != want {
			t.Errorf("%s: ReplyToFrame = %+v, %v; want %+v", p, got, ok, want)
		}
	}
}
