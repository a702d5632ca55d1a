package traceflow

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

func ptr[T any](v T) *T { return &v }

func TestBuild(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: map[string]string{labels.ManagedBy: labels.Manager}}
	}
	typeMeta := metav1.TypeMeta{APIVersion: "crd.antrea.io/v1beta1", Kind: "Traceflow"}
	src := Source{Namespace: "default", Pod: "pod-a"}
	tests := []struct {
		name string
		req  Request
		want *Traceflow
	}{
		{
			name: "TCP to a pod with SYN",
			req: Request{Name: "t1", Source: src, Destination: Destination{Namespace: "default", Pod: "pod-b"},
				Protocol: TCP, DstPort: 80, TCPFlags: TCPFlagSYN, TTL: 64, Timeout: 20 * time.Second},
			want: &Traceflow{TypeMeta: typeMeta, ObjectMeta: meta("t1"), Spec: Spec{
				Source: src, Destination: Destination{Namespace: "default", Pod: "pod-b"}, Timeout: 20,
				Packet: Packet{
					IPHeader:        &IPHeader{Protocol: 6, TTL: 64},
					TransportHeader: TransportHeader{TCP: &TCPHeader{DstPort: 80, Flags: ptr(int32(2))}},
				},
			}},
		},
		{
			name: "TCP with no flags keeps an explicit zero",
			req: Request{Name: "t0", Source: src, Destination: Destination{IP: "10.0.0.9"},
				Protocol: TCP, DstPort: 443, SrcPort: 40000, TCPFlags: 0, TTL: 3, Timeout: time.Second},
			want: &Traceflow{TypeMeta: typeMeta, ObjectMeta: meta("t0"), Spec: Spec{
				Source: src, Destination: Destination{IP: "10.0.0.9"}, Timeout: 1,
				Packet: Packet{
					IPHeader:        &IPHeader{Protocol: 6, TTL: 3},
					TransportHeader: TransportHeader{TCP: &TCPHeader{SrcPort: 40000, DstPort: 443, Flags: ptr(int32(0))}},
				},
			}},
		},
		{
			name: "UDP to a Service, live, dropped only",
			req: Request{Name: "t2", Source: src, Destination: Destination{Namespace: "web", Service: "dns"},
				Protocol: UDP, DstPort: 53, TTL: 64, Live: true, DroppedOnly: true, Timeout: 300 * time.Second},
			want: &Traceflow{TypeMeta: typeMeta, ObjectMeta: meta("t2"), Spec: Spec{
				Source: src, Destination: Destination{Namespace: "web", Service: "dns"},
				LiveTraffic: true, DroppedOnly: true, Timeout: 300,
				Packet: Packet{
					IPHeader:        &IPHeader{Protocol: 17, TTL: 64},
					TransportHeader: TransportHeader{UDP: &UDPHeader{DstPort: 53}},
				},
			}},
		},
		{
			name: "ICMPv6 echo to an IPv6 address",
			req: Request{Name: "t3", Source: src, Destination: Destination{IP: "fd00::5"},
				Protocol: ICMP, IPv6: true, TTL: 64, Timeout: 20 * time.Second},
			want: &Traceflow{TypeMeta: typeMeta, ObjectMeta: meta("t3"), Spec: Spec{
				Source: src, Destination: Destination{IP: "fd00::5"}, Timeout: 20,
				Packet: Packet{
					IPv6Header:      &IPv6Header{NextHeader: ptr(int32(58)), HopLimit: 64},
					TransportHeader: TransportHeader{ICMP: &ICMPEchoRequestHeader{}},
				},
			}},
		},
		{
			name: "ICMP echo over IPv4",
			req:  Request{Name: "t4", Source: src, Destination: Destination{Namespace: "default", Pod: "pod-b"}, Protocol: ICMP, TTL: 64, Timeout: 20 * time.Second},
			want: &Traceflow{TypeMeta: typeMeta, ObjectMeta: meta("t4"), Spec: Spec{
				Source: src, Destination: Destination{Namespace: "default", Pod: "pod-b"}, Timeout: 20,
				Packet: Packet{
					IPHeader:        &IPHeader{Protocol: 1, TTL: 64},
					TransportHeader: TransportHeader{ICMP: &ICMPEchoRequestHeader{}},
				},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Build(tt.req)); diff != "" {
				t.Errorf("Build() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestName(t *testing.T) {
	tests := []struct {
		name, src, dst, suffix, want string
	}{
		{"pods", "pod-a", "pod-b", "x7k2q", "pod-a-to-pod-b-x7k2q"},
		{"IPv4", "pod-a", "10.0.0.1", "abcde", "pod-a-to-10-0-0-1-abcde"},
		{"IPv6", "pod-a", "fd00::1", "abcde", "pod-a-to-fd00--1-abcde"},
		{"dotted pod name", "web.v1", "db", "abcde", "web-v1-to-db-abcde"},
		{"long names are cut", "a234567890123456789012345678901234567890", "b234567890123456789012345678901234567890", "abcde",
			"a234567890123456789012345678901234567890-to-b2345678-abcde"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Name(tt.src, tt.dst, tt.suffix)
			if got != tt.want {
				t.Errorf("Name(%q, %q, %q) = %q, want %q", tt.src, tt.dst, tt.suffix, got, tt.want)
			}
			if len(got) > 63 {
				t.Errorf("Name() = %q is %d characters, longer than 63", got, len(got))
			}
		})
	}
}

func TestParseTCPFlags(t *testing.T) {
	tests := []struct {
		in     string
		want   int32
		wantOK bool
	}{
		{"SYN", TCPFlagSYN, true},
		{"syn", TCPFlagSYN, true},
		{"SYN,ACK", TCPFlagSYN | TCPFlagACK, true},
		{"FIN|ACK", TCPFlagFIN | TCPFlagACK, true},
		{"RST, PSH , URG,ECE,CWR", TCPFlagRST | TCPFlagPSH | TCPFlagURG | TCPFlagECE | TCPFlagCWR, true},
		{"2", 2, true},
		{"0", 0, true},
		{"none", 0, true},
		{"ECE,CWR", TCPFlagECE | TCPFlagCWR, true},
		{"0x12", 0x12, true},
		{"255", 255, true},
		{"256", 0, false},
		{"0x", 0, false},
		{"", 0, false},
		{"SYNACK", 0, false},
		{",", 0, false},
		{"-1", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseTCPFlags(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseTCPFlags(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestFormatTCPFlags(t *testing.T) {
	for flags, want := range map[int32]string{0: "none", 2: "SYN", 0x12: "SYN,ACK", 0x11: "ACK,FIN"} {
		if got := FormatTCPFlags(flags); got != want {
			t.Errorf("FormatTCPFlags(%#x) = %q, want %q", flags, got, want)
		}
	}
}

func FuzzParseTCPFlags(f *testing.F) {
	for _, s := range []string{"SYN", "SYN,ACK", "0x12", "255", "", "FIN|RST"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flags, ok := ParseTCPFlags(s)
		if !ok {
			return
		}
		if flags < 0 || flags > 255 {
			t.Fatalf("ParseTCPFlags(%q) = %d, outside a byte", s, flags)
		}
		back, ok := ParseTCPFlags(FormatTCPFlags(flags))
		if !ok || back != flags {
			t.Fatalf("round trip of %q: %d -> %q -> %d", s, flags, FormatTCPFlags(flags), back)
		}
	})
}
