package probe

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
)

// csum is the Internet checksum, written here independently of gopacket.
func csum(parts ...[]byte) uint16 {
	var s uint32
	for _, p := range parts {
		for i := 0; i+1 < len(p); i += 2 {
			s += uint32(binary.BigEndian.Uint16(p[i:]))
		}
		if len(p)%2 == 1 {
			s += uint32(p[len(p)-1]) << 8
		}
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(^s)
}

func spec(src, dst string, p Protocol) Spec {
	return Spec{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr(src), DstIP: netip.MustParseAddr(dst), Protocol: p,
		SrcPort: 40000, DstPort: 80, TCPFlags: 0x02, Tag: 37, TTL: 9, ICMPID: 5, ICMPSeq: 1,
	}
}

func withFlags(s Spec, f uint8) Spec { s.TCPFlags = f; return s }

func TestBuildChecksumsAndTag(t *testing.T) {
	for name, s := range map[string]Spec{
		"ipv4 tcp":    spec("10.0.0.1", "10.0.0.2", TCP),
		"ipv4 udp":    spec("10.0.0.1", "10.0.0.2", UDP),
		"ipv4 icmp":   spec("10.0.0.1", "10.0.0.2", ICMP),
		"ipv6 tcp":    spec("fd00::1", "fd00::2", TCP),
		"ipv6 udp":    spec("fd00::1", "fd00::2", UDP),
		"ipv6 icmpv6": spec("fd00::1", "fd00::2", ICMP),
	} {
		t.Run(name, func(t *testing.T) {
			f, err := Build(s)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := Decode(f)
			if err != nil {
				t.Fatal(err)
			}
			if dscp.Value(sum.Tag) != 37 || sum.TTL != 9 || sum.SrcIP != s.SrcIP || sum.DstIP != s.DstIP {
				t.Errorf("decoded %+v", sum)
			}
			if !sum.IsProbe(37, 0, s.SrcPort) || sum.IsProbe(36, 0, s.SrcPort) || (s.Protocol != ICMP && sum.IsProbe(37, 0, s.SrcPort+1)) {
				t.Errorf("IsProbe disagrees: %+v", sum)
			}
			// A trace's own mark: the probe built with it is the probe,
			// one built with the tag's default mark (what a pod knowing
			// only the tag could forge) is not.
			own := s
			own.Mark = 0xbeef5
			g, err := Build(own)
			if err != nil {
				t.Fatal(err)
			}
			gs, _ := Decode(g)
			if !gs.IsProbe(37, own.Mark, s.SrcPort) || gs.IsProbe(37, 0, s.SrcPort) || sum.IsProbe(37, own.Mark, s.SrcPort) {
				t.Errorf("IsProbe with a trace's own mark disagrees: %+v / %+v", gs, sum)
			}
			var pseudo, l4 []byte
			var proto byte
			if s.DstIP.Is4() {
				ip := f[14:34]
				if csum(ip) != 0 {
					t.Errorf("IPv4 header checksum wrong")
				}
				if ip[1]>>2 != 37 || ip[8] != 9 || ip[6]&0x40 == 0 {
					t.Errorf("TOS %#x TTL %d flags %#x", ip[1], ip[8], ip[6])
				}
				// The frame may be padded to 60 bytes: the IP length says where L4 ends.
				proto, l4 = ip[9], f[34:14+int(binary.BigEndian.Uint16(ip[2:]))]
				pseudo = append(append(append([]byte(nil), ip[12:20]...), 0, proto), byte(len(l4)>>8), byte(len(l4)))
			} else {
				ip := f[14:54]
				if tc := binary.BigEndian.Uint32(ip) >> 20 & 0xff; tc>>2 != 37 {
					t.Errorf("traffic class %#x", tc)
				}
				proto, l4 = ip[6], f[54:]
				pseudo = append(append([]byte(nil), ip[8:40]...), 0, 0, byte(len(l4)>>8), byte(len(l4)), 0, 0, 0, proto)
			}
			if proto == 1 { // ICMPv4 has no pseudo header
				pseudo = nil
			}
			if c := csum(pseudo, l4); c != 0 {
				t.Errorf("protocol %d checksum does not verify (%#x)", proto, c)
			}
			switch proto {
			case 6:
				if l4[13] != 0x02 || binary.BigEndian.Uint16(l4[2:]) != 80 {
					t.Errorf("TCP flags %#x dport %d", l4[13], binary.BigEndian.Uint16(l4[2:]))
				}
			case 1, 58:
				if l4[0] != 8 && l4[0] != 128 {
					t.Errorf("ICMP type %d, want echo request", l4[0])
				}
			}
		})
	}
}

func TestBuildRejects(t *testing.T) {
	bad := map[string]func(*Spec){
		"mixed families": func(s *Spec) { s.DstIP = netip.MustParseAddr("fd00::2") },
		"tag zero":       func(s *Spec) { s.Tag = 0 },
		"tag too big":    func(s *Spec) { s.Tag = 64 },
		"no mac":         func(s *Spec) { s.SrcMAC = nil },
		"protocol":       func(s *Spec) { s.Protocol = "sctp" },
		"no ip":          func(s *Spec) { s.SrcIP = netip.Addr{} },
	}
	for name, mutate := range bad {
		t.Run(name, func(t *testing.T) {
			s := spec("10.0.0.1", "10.0.0.2", TCP)
			mutate(&s)
			if _, err := Build(s); err == nil || !strings.HasPrefix(err.Error(), "probe:") {
				t.Errorf("error %v", err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	b, _ := Build(spec("10.0.0.1", "10.0.0.2", TCP))
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = Decode(b) })
}

// WithTag replaces the whole traffic class byte: tag 0 leaves neither a
// DSCP value nor an ECN codepoint, and the tag put back gives the frame
// again; a probe whose ECN differs is not the probe.
func TestWithTag(t *testing.T) {
	for _, s := range []Spec{spec("10.0.0.1", "10.0.0.2", TCP), spec("fd00::1", "fd00::2", UDP)} {
		s.Tag = dscp.Tag(37, 2)
		f, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		if sum, err := Decode(f); err != nil || dscp.Value(sum.Tag) != 37 || sum.Tag != s.Tag || !sum.IsProbe(s.Tag, s.Mark, 0) || sum.IsProbe(37, s.Mark, 0) {
			t.Errorf("%s: tagged %+v %v", s.DstIP, sum, err)
		}
		g := WithTag(f, 0)
		sum, err := Decode(g)
		if err != nil || dscp.Value(sum.Tag) != 0 || sum.Tag != 0 || sum.DstIP != s.DstIP {
			t.Errorf("%s: %+v %v", s.DstIP, sum, err)
		}
		if s.DstIP.Is4() && csum(g[14:34]) != 0 {
			t.Error("IPv4 header checksum not fixed")
		}
		if back := WithTag(g, s.Tag); string(back) != string(f) {
			t.Errorf("%s: re-tagging does not give the original frame", s.DstIP)
		}
	}
}

func TestTraceFlow(t *testing.T) {
	for name, tc := range map[string]struct {
		s    Spec
		want string
	}{
		"ipv4 tcp": {spec("10.0.0.1", "10.0.0.2", TCP),
			"tcp,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_tos=148,nw_ecn=0,nw_ttl=9,tcp_src=40000,tcp_dst=80,tcp_flags=0x2"},
		"tcp no flags": {withFlags(spec("10.0.0.1", "10.0.0.2", TCP), 0),
			"tcp,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_tos=148,nw_ecn=0,nw_ttl=9,tcp_src=40000,tcp_dst=80,tcp_flags=0x0"},
		"tcp every flag": {withFlags(spec("10.0.0.1", "10.0.0.2", TCP), 0xff),
			"tcp,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_tos=148,nw_ecn=0,nw_ttl=9,tcp_src=40000,tcp_dst=80,tcp_flags=0xff"},
		"tcp ack ece cwr": {withFlags(spec("10.0.0.1", "10.0.0.2", TCP), 0xd0),
			"tcp,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_tos=148,nw_ecn=0,nw_ttl=9,tcp_src=40000,tcp_dst=80,tcp_flags=0xd0"},
		"ipv4 icmp": {spec("10.0.0.1", "10.0.0.2", ICMP),
			"icmp,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_tos=148,nw_ecn=0,nw_ttl=9,icmp_type=8,icmp_code=0"},
		"ipv6 udp": {spec("fd00::1", "fd00::2", UDP),
			"udp6,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,ipv6_src=fd00::1,ipv6_dst=fd00::2,ipv6_label=0x5496a,nw_tos=148,nw_ecn=0,nw_ttl=9,udp_src=40000,udp_dst=80"},
		"ipv6 icmp": {spec("fd00::1", "fd00::2", ICMP),
			"icmp6,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,ipv6_src=fd00::1,ipv6_dst=fd00::2,ipv6_label=0x5496a,nw_tos=148,nw_ecn=0,nw_ttl=9,icmpv6_type=128,icmpv6_code=0"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := Build(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := TraceFlow(f)
			if err != nil || got != tc.want {
				t.Errorf("got %q %v\nwant %q", got, err, tc.want)
			}
		})
	}
}

// The flags byte goes on the wire as given: 0 is no flag (not SYN), and ECE
// and CWR are not lost.
func TestBuildTCPFlagsOnTheWire(t *testing.T) {
	for _, f := range []uint8{0, 0x02, 0x10, 0x12, 0x40, 0x80, 0xd0, 0xff} {
		frame, err := Build(withFlags(spec("10.0.0.1", "10.0.0.2", TCP), f))
		if err != nil {
			t.Fatal(err)
		}
		// Ethernet 14 + IPv4 20, then the TCP flags byte at offset 13.
		if got := frame[14+20+13]; got != f {
			t.Errorf("flags %#02x: the frame carries %#02x", f, got)
		}
	}
}
