package traceflow

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Protocol is the transport protocol of the probe.
type Protocol string

// Protocols a probe can carry.
const (
	ICMP Protocol = "ICMP"
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
)

// TCP flag bits for TCPHeader.Flags.
const (
	TCPFlagFIN int32 = 0x01
	TCPFlagSYN int32 = 0x02
	TCPFlagRST int32 = 0x04
	TCPFlagPSH int32 = 0x08
	TCPFlagACK int32 = 0x10
	TCPFlagURG int32 = 0x20
	TCPFlagECE int32 = 0x40
	TCPFlagCWR int32 = 0x80
)

// DefaultTTL is the TTL (hop limit) of a probe unless --ttl says otherwise.
const DefaultTTL = 64

// Request is everything Build needs, already resolved and validated: the
// builder only arranges values, it decides nothing.
type Request struct {
	// Name is the object's name; see Name.
	Name        string
	Source      Source
	Destination Destination
	Protocol    Protocol
	IPv6        bool
	SrcPort     int32
	DstPort     int32
	TCPFlags    int32
	TTL         int32
	Live        bool
	DroppedOnly bool
	Timeout     time.Duration
}

// Build returns the Traceflow for r. It is pure: the same request gives the
// same object.
func Build(r Request) *Traceflow {
	tf := &Traceflow{
		TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:   r.Name,
			Labels: map[string]string{labels.ManagedBy: labels.Manager},
		},
		Spec: Spec{
			Source:      r.Source,
			Destination: r.Destination,
			LiveTraffic: r.Live,
			DroppedOnly: r.DroppedOnly,
			Timeout:     int32(r.Timeout / time.Second),
		},
	}
	p := &tf.Spec.Packet
	proto := protocolNumber(r.Protocol, r.IPv6)
	if r.IPv6 {
		p.IPv6Header = &IPv6Header{NextHeader: &proto, HopLimit: r.TTL}
	} else {
		p.IPHeader = &IPHeader{Protocol: proto, TTL: r.TTL}
	}
	switch r.Protocol {
	case TCP:
		flags := r.TCPFlags
		p.TransportHeader.TCP = &TCPHeader{SrcPort: r.SrcPort, DstPort: r.DstPort, Flags: &flags}
	case UDP:
		p.TransportHeader.UDP = &UDPHeader{SrcPort: r.SrcPort, DstPort: r.DstPort}
	default:
		p.TransportHeader.ICMP = &ICMPEchoRequestHeader{}
	}
	return tf
}

func protocolNumber(p Protocol, ipv6 bool) int32 {
	switch p {
	case TCP:
		return ProtocolTCP
	case UDP:
		return ProtocolUDP
	}
	if ipv6 {
		return ProtocolICMPv6
	}
	return ProtocolICMP
}

// maxNameStem leaves room for "-" and the suffix within the 63 characters
// that kubectl get shows without wrapping, and that a label value (the trace
// name on helper pods) allows.
const maxNameStem = 63 - 1 - 10

// Name returns a readable, valid object name "SRC-to-DST-SUFFIX" for a trace
// from the pod src to dst (a pod or Service name, or an IP), where suffix is
// injected (random in the command, fixed in tests) so that two traces of
// the same pair do not collide.
func Name(src, dst, suffix string) string {
	stem := sanitize(src) + "-to-" + sanitize(dst)
	if len(stem) > maxNameStem {
		stem = stem[:maxNameStem]
	}
	return strings.Trim(stem, "-") + "-" + sanitize(suffix)
}

// sanitize maps s to lower-case alphanumerics and '-' (IPv6 colons and IPv4
// dots become dashes), trimmed of dashes at the ends.
func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-")
}

// ParseTCPFlags parses flag names separated by ',' or '|' (SYN, ACK, FIN,
// RST, PSH, URG, ECE, CWR, case-insensitive), "none", or a number 0-255
// (decimal or 0x hex), into TCPHeader.Flags bits. 0 is no flags at all,
// not a default.
func ParseTCPFlags(s string) (int32, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if n, ok := parseByte(s); ok {
		return n, true
	}
	if strings.EqualFold(s, "none") { // what FormatTCPFlags says for 0
		return 0, true
	}
	names := map[string]int32{
		"FIN": TCPFlagFIN, "SYN": TCPFlagSYN, "RST": TCPFlagRST, "PSH": TCPFlagPSH,
		"ACK": TCPFlagACK, "URG": TCPFlagURG, "ECE": TCPFlagECE, "CWR": TCPFlagCWR,
	}
	var flags int32
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '|' }) {
		bit, ok := names[strings.ToUpper(strings.TrimSpace(f))]
		if !ok {
			return 0, false
		}
		flags |= bit
	}
	return flags, flags != 0
}

func parseByte(s string) (int32, bool) {
	base, digits := 10, s
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		base, digits = 16, s[2:]
	}
	if digits == "" || len(digits) > 3 {
		return 0, false
	}
	var n int32
	for _, c := range strings.ToLower(digits) {
		var d int32
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case base == 16 && c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return 0, false
		}
		n = n*int32(base) + d
	}
	return n, n <= 255
}

// FormatTCPFlags names the bits of flags, e.g. "SYN,ACK"; "none" for 0.
func FormatTCPFlags(flags int32) string {
	order := []struct {
		bit  int32
		name string
	}{
		{TCPFlagSYN, "SYN"}, {TCPFlagACK, "ACK"}, {TCPFlagFIN, "FIN"}, {TCPFlagRST, "RST"},
		{TCPFlagPSH, "PSH"}, {TCPFlagURG, "URG"}, {TCPFlagECE, "ECE"}, {TCPFlagCWR, "CWR"},
	}
	var names []string
	for _, f := range order {
		if flags&f.bit != 0 {
			names = append(names, f.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}
