package tracer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
)

var (
	ctPod  = netip.MustParseAddr("10.244.1.5")
	ctHost = netip.MustParseAddr("10.89.0.1")
	ctNode = netip.MustParseAddr("10.89.0.11")
)

// le16 and le32 are in the host's byte order, as netlink's lengths and
// types are (its addresses and ports are big-endian).
func le16(v uint16) []byte { return binary.NativeEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func TestCTRequestLayout(t *testing.T) {
	orig := ctTuple{Proto: 6, Src: ctPod, Dst: ctHost, SrcPort: 61234, DstPort: 80}
	var want []byte
	cat := func(parts ...[]byte) {
		for _, p := range parts {
			want = append(want, p...)
		}
	}
	// nlmsghdr: length, IPCTNL_MSG_CT_GET of NFNL_SUBSYS_CTNETLINK,
	// NLM_F_REQUEST|NLM_F_ACK, sequence 7, port 0.
	cat(le32(72), le16(0x0101), le16(0x0005), le32(7), le32(0))
	cat([]byte{2, 0, 0, 0})                         // nfgenmsg: AF_INET, version 0, res_id 0
	cat(le16(52), le16(0x8001))                     // CTA_TUPLE_ORIG, nested
	cat(le16(20), le16(0x8001))                     // CTA_TUPLE_IP, nested
	cat(le16(8), le16(1), []byte{10, 244, 1, 5})    // CTA_IP_V4_SRC
	cat(le16(8), le16(2), []byte{10, 89, 0, 1})     // CTA_IP_V4_DST
	cat(le16(28), le16(0x8002))                     // CTA_TUPLE_PROTO, nested
	cat(le16(5), le16(1), []byte{6, 0, 0, 0})       // CTA_PROTO_NUM, padded
	cat(le16(6), le16(2), []byte{0xef, 0x32, 0, 0}) // CTA_PROTO_SRC_PORT 61234, big-endian
	cat(le16(6), le16(3), []byte{0, 80, 0, 0})      // CTA_PROTO_DST_PORT 80
	if got := ctRequest(ctMsgGet, 7, orig); !bytes.Equal(got, want) {
		t.Fatalf("request:\n got %x\nwant %x", got, want)
	}
	icmp := ctRequest(ctMsgDelete, 1, ctTuple{Proto: 1, Src: ctPod, Dst: ctHost, ID: 0x1234, Type: 8})
	if binary.NativeEndian.Uint16(icmp[4:]) != 0x0102 {
		t.Errorf("delete request type %#x, want 0x0102", binary.NativeEndian.Uint16(icmp[4:]))
	}
	for _, attr := range [][]byte{
		append(append(le16(6), le16(4)...), 0x12, 0x34, 0, 0), // CTA_PROTO_ICMP_ID
		append(append(le16(5), le16(5)...), 8, 0, 0, 0),       // CTA_PROTO_ICMP_TYPE echo request
		append(append(le16(5), le16(6)...), 0, 0, 0, 0),       // CTA_PROTO_ICMP_CODE
	} {
		if !bytes.Contains(icmp, attr) {
			t.Errorf("ICMP request %x lacks attribute %x", icmp, attr)
		}
	}
}

// ctNewMessage is a connection as the kernel reports it: both tuples,
// its status and its zone, in a CT_NEW message.
func ctNewMessage(orig, reply ctTuple, zone uint16) []byte {
	body := []byte{2, 0, 0, 0}
	body = append(body, nlAttr(ctaTupleOrig|nlaNested, tupleAttrs(orig))...)
	body = append(body, nlAttr(ctaTupleReply|nlaNested, tupleAttrs(reply))...)
	body = append(body, nlAttr(3, be32(0x188))...) // CTA_STATUS
	if zone != 0 {
		body = append(body, nlAttr(ctaZone, be16(zone))...)
	}
	return append(append(append(append(le32(uint32(16+len(body))), le16(0x0100)...), le16(0)...), make([]byte, 8)...), body...) //nolint:gosec // short
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func TestParseCTMessages(t *testing.T) {
	orig := ctTuple{Proto: 17, Src: ctPod, Dst: ctHost, SrcPort: 61234, DstPort: 53}
	masq := ctTuple{Proto: 17, Src: ctHost, Dst: ctNode, SrcPort: 53, DstPort: 40001}
	plain := ctTuple{Proto: 17, Src: ctHost, Dst: ctPod, SrcPort: 53, DstPort: 61234}
	b := append(ctNewMessage(orig, masq, 0), ctNewMessage(orig, plain, 65520)...)
	got, err := parseCTMessages(b)
	if err != nil || len(got) != 2 {
		t.Fatalf("parse: %v, %d connections", err, len(got))
	}
	if got[0].Orig != orig || got[0].Reply != masq || got[0].Zone != 0 || !got[0].SourceTranslated() {
		t.Errorf("first connection %+v: want %v answered as %v, zone 0, translated", got[0], orig, masq)
	}
	if got[1].Zone != 65520 || got[1].SourceTranslated() {
		t.Errorf("second connection %+v: want zone 65520, untranslated", got[1])
	}
	// The kernel's answer to a request for a connection it does not track.
	enoent := append(append(append(le32(36), le16(nlmsgError)...), le16(0)...), make([]byte, 8)...)
	enoent = append(append(enoent, le32(uint32(0xfffffffe))...), make([]byte, 16)...)
	if _, err := parseCTMessages(enoent); !errors.Is(err, errCTNotFound) {
		t.Errorf("ENOENT: %v, want errCTNotFound", err)
	}
	if _, err := parseCTMessages(append(le32(400), make([]byte, 12)...)); err == nil {
		t.Error("a message longer than the datagram parsed")
	}
}

func TestSourceTranslatedICMP(t *testing.T) {
	orig := ctTuple{Proto: 1, Src: ctPod, Dst: ctHost, ID: 7, Type: 8}
	for _, tc := range []struct {
		reply ctTuple
		want  bool
	}{
		{ctTuple{Proto: 1, Src: ctHost, Dst: ctPod, ID: 7}, false},
		{ctTuple{Proto: 1, Src: ctHost, Dst: ctNode, ID: 7}, true},
		{ctTuple{Proto: 1, Src: ctHost, Dst: ctPod, ID: 9}, true},
	} {
		if got := (ctEntry{Orig: orig, Reply: tc.reply}).SourceTranslated(); got != tc.want {
			t.Errorf("answered as %v: translated %v, want %v", tc.reply, got, tc.want)
		}
	}
}

func TestFrameTuple(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, tc := range []struct {
		spec probe.Spec
		want ctTuple
	}{
		{probe.Spec{Protocol: probe.TCP, SrcPort: 61000, DstPort: 80, TCPFlags: 2}, ctTuple{Proto: 6, SrcPort: 61000, DstPort: 80}},
		{probe.Spec{Protocol: probe.UDP, SrcPort: 61001, DstPort: 53}, ctTuple{Proto: 17, SrcPort: 61001, DstPort: 53}},
		{probe.Spec{Protocol: probe.ICMP, ICMPID: 0x4242, ICMPSeq: 1}, ctTuple{Proto: 1, ID: 0x4242, Type: 8}},
	} {
		tc.spec.SrcMAC, tc.spec.DstMAC, tc.spec.SrcIP, tc.spec.DstIP, tc.spec.Tag = mac, mac, ctPod, ctHost, 5
		tc.want.Src, tc.want.Dst = ctPod, ctHost
		frame, err := probe.Build(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := frameTuple(frame); !ok || got != tc.want {
			t.Errorf("%s probe: tuple %+v (%v), want %+v", tc.spec.Protocol, got, ok, tc.want)
		}
	}
	if _, ok := frameTuple([]byte{1, 2, 3}); ok {
		t.Error("a runt frame has a tuple")
	}
}
