package openflow

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func prop(t uint16, v []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, t)
	b = binary.BigEndian.AppendUint16(b, uint16(4+len(v)))
	b = append(b, v...)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

func packetIn2(props ...[]byte) []byte {
	b := []byte{Version, typeExperimenter, 0, 0, 0, 0, 0, 9}
	b = binary.BigEndian.AppendUint32(b, nxVendorID)
	b = binary.BigEndian.AppendUint32(b, nxtPacketIn2)
	for _, p := range props {
		b = append(b, p...)
	}
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	return b
}

func samplePacketIn2(paused bool) []byte {
	md := InPortField(3)
	md = append(md, oxm(classNXM1, 1, []byte{0, 0, 0, 0x64})...)               // reg1
	md = append(md, oxm(classNXM1, nxmTunIPv4Dst, []byte{192, 168, 77, 2})...) // tun_dst
	md = append(md, oxm(classOpenFlow, ofbTunnelID, make([]byte, 8))...)
	md = append(md, oxm(classPacketRegs, 1, []byte{0, 0, 0, 1, 0, 0, 0, 2})...) // xreg1 = reg2, reg3
	md = append(md, oxm(classOpenFlow, ofbMetadata, []byte{0, 0, 0, 0, 0, 0, 0, 5})...)
	props := [][]byte{
		prop(pinPacket, []byte{1, 2, 3, 4, 5}),
		prop(pinFullLen, []byte{0, 0, 0, 5}),
		prop(pinTableID, []byte{20}),
		prop(pinCookie, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x74, 0x66}),
		prop(pinReason, []byte{1}),
		prop(pinMetadata, md),
		prop(pinUserdata, []byte{0x54, 0x46, 5, 0, 0, 7, 0, 0}),
	}
	if paused {
		props = append(props, prop(pinContinuation, []byte{0, 0, 0, 0}))
	}
	return packetIn2(props...)
}

func TestDecodePacketIn2(t *testing.T) {
	msg := samplePacketIn2(true)
	got, err := DecodePacketIn2(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := PacketIn{
		TableID: 20, Cookie: 0x7466, Reason: 1, FullLen: 5, Packet: []byte{1, 2, 3, 4, 5},
		Userdata: []byte{0x54, 0x46, 5, 0, 0, 7, 0, 0}, Paused: true, Properties: msg[16:],
		Metadata: Metadata{InPort: 3, HasTunID: true, TunDst: netip.MustParseAddr("192.168.77.2"),
			Regs: [16]uint32{1: 0x64, 2: 1, 3: 2}, RegsSet: 0b1110, Meta: 5, HasMeta: true},
	}
	if d := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{})); d != "" {
		t.Errorf("decoded packet-in (-want +got):\n%s", d)
	}
	// NXT_RESUME hands the properties back unchanged.
	r := Resume(11, got)
	if !bytes.Equal(r[16:], msg[16:]) || binary.BigEndian.Uint32(r[12:]) != nxtResume || int(binary.BigEndian.Uint16(r[2:])) != len(r) {
		t.Errorf("resume %x does not carry the packet-in's properties", r)
	}
}

func TestDecodePacketIn2Errors(t *testing.T) {
	good := samplePacketIn2(false)
	for name, msg := range map[string][]byte{
		"not experimenter": {Version, typeError, 0, 16, 0, 0, 0, 0, 0, 0, 0x23, 0x20, 0, 0, 0, 30},
		"length mismatch":  append(append([]byte(nil), good...), 0, 0, 0, 0, 0, 0, 0, 0),
		"bad property":     packetIn2([]byte{0, 0, 0, 200, 0, 0, 0, 0}),
		"short property":   packetIn2([]byte{0, 0, 0, 2, 0, 0, 0, 0}),
		"bad metadata":     packetIn2(prop(pinMetadata, []byte{0x80, 0, 0, 9, 1})),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodePacketIn2(msg); err == nil {
				t.Error("no error")
			}
		})
	}
}

func flowDescEntry(table uint8, prio uint16, cookie uint64, match, inst []byte) []byte {
	m := encodeMatch(match)
	e := make([]byte, 24)
	e[4] = table
	binary.BigEndian.PutUint16(e[6:], prio)
	binary.BigEndian.PutUint64(e[16:], cookie)
	e = append(e, m...)
	e = append(e, 0, 0, 0, 12, 0x80, 2, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0) // ofp_stats with one OXS field, padded
	e = append(e, inst...)
	binary.BigEndian.PutUint16(e, uint16(len(e)))
	return e
}

func TestDecodeFlowDescs(t *testing.T) {
	m1 := append(InPortField(1), EthTypeField(0x800)...)
	i1 := applyActions(ResubmitAction(3))
	body := append(flowDescEntry(3, 200, 0x1004, m1, i1), flowDescEntry(3, 0, 0, nil, gotoTable(5))...)
	got, err := DecodeFlowDescs(body)
	if err != nil {
		t.Fatal(err)
	}
	want := []FlowDesc{
		{TableID: 3, Priority: 200, Cookie: 0x1004, Match: m1, Instructions: i1},
		{TableID: 3, Priority: 0, Cookie: 0, Match: []byte{}, Instructions: gotoTable(5)},
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("flow descs (-want +got):\n%s", d)
	}
	if _, err := DecodeFlowDescs(body[:40]); err == nil {
		t.Error("truncated body decoded without error")
	}
}

func TestPrependActions(t *testing.T) {
	a := []byte{0xff, 0xff, 0, 8, 0, 0, 0, 1}
	apply := applyActions(ResubmitAction(1))
	for name, tc := range map[string]struct{ inst, want []byte }{
		"into apply-actions":      {apply, applyActions(append(append([]byte(nil), a...), ResubmitAction(1)...))},
		"before goto":             {gotoTable(4), append(applyActions(a), gotoTable(4)...)},
		"after other, into apply": {append(gotoTable(4), apply...), append(gotoTable(4), applyActions(append(append([]byte(nil), a...), ResubmitAction(1)...))...)},
		"empty":                   {nil, applyActions(a)},
	} {
		t.Run(name, func(t *testing.T) {
			if got := prependActions(tc.inst, a); !bytes.Equal(got, tc.want) {
				t.Errorf("got %x, want %x", got, tc.want)
			}
		})
	}
}

func TestDecodeTableFeatures(t *testing.T) {
	entry := func(id uint8, name string) []byte {
		b := make([]byte, 72)
		binary.BigEndian.PutUint16(b, 72)
		b[2] = id
		copy(b[8:40], name)
		return b
	}
	got, err := DecodeTableFeatures(append(entry(0, "Classifier"), entry(1, "table1")...))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]TableName{{0, "Classifier"}, {1, "table1"}}, got); d != "" {
		t.Error(d)
	}
}

func TestOXMHelpers(t *testing.T) {
	m := append(EthTypeField(0x86dd), DSCPField(9)...)
	if EthTypeOf(m) != 0x86dd || !HasDSCP(m) || HasDSCP(EthTypeField(0x800)) || EthTypeOf(nil) != 0 {
		t.Error("OXM helpers disagree with the fields")
	}
	masked := []byte{0x00, 0x01, 0x03, 8, 0, 0, 0, 1, 0, 0, 0, 0xff} // reg1 with mask
	fs, err := ParseOXM(masked)
	if err != nil || len(fs) != 1 || !fs[0].HasMask || !bytes.Equal(fs[0].Mask, []byte{0, 0, 0, 0xff}) {
		t.Errorf("masked field: %+v %v", fs, err)
	}
	if _, err := ParseOXM([]byte{0x80, 0, 0, 9}); err == nil {
		t.Error("overlong field parsed")
	}
}

func FuzzDecodePacketIn2(f *testing.F) {
	f.Add(samplePacketIn2(true))
	f.Add(samplePacketIn2(false))
	f.Fuzz(func(t *testing.T, b []byte) {
		pin, err := DecodePacketIn2(b)
		if err == nil && IsPacketIn2(b) {
			_ = Resume(1, pin)
		}
	})
}

func FuzzDecodeFlowDescs(f *testing.F) {
	f.Add(flowDescEntry(3, 200, 1, InPortField(1), gotoTable(4)))
	f.Fuzz(func(t *testing.T, b []byte) {
		fds, _ := DecodeFlowDescs(b)
		for _, fd := range fds {
			_ = CopyFlow(1, fd, CopySpec{Prepend: []byte{0xff, 0xff, 0, 8, 0, 0, 0, 0}})
		}
	})
}

func FuzzParseOXM(f *testing.F) {
	f.Add(append(InPortField(1), DSCPField(3)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseOXM(b)
		_, _ = DecodeMetadata(b)
		_, _ = DecodeTableFeatures(b)
	})
}

// The bytes of an OpenFlow 1.5 OFPT_FLOW_REMOVED; `ovs-ofctl ofp-print`
// reads them as "priority=65534 reason=delete table_id=0
// cookie:0x74662500001eef01 ... hard5".
func TestDecodeFlowRemoved(t *testing.T) {
	msg, err := hex.DecodeString("060b0028000000000002fffe0000000574662500001eef01" + // header, table 0, reason 2, priority, timeouts, cookie
		"0001000400000000" + // empty match
		"0000000400000000") // empty stats
	if err != nil {
		t.Fatal(err)
	}
	fr, err := DecodeFlowRemoved(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := FlowRemoved{Cookie: 0x74662500001eef01, Priority: 65534, Reason: RemovedDelete, TableID: 0}
	if fr != want {
		t.Fatalf("got %+v, want %+v", fr, want)
	}
	if _, err := DecodeFlowRemoved(msg[:20]); err == nil {
		t.Error("a short message decoded")
	}
}

func TestFlowModFields(t *testing.T) {
	m := NewFlow(7, 3, 100, 0x7466000000000001, 20, nil, nil)
	SetFlowModFlags(m, FlagSendFlowRem)
	SetFlowModHardTimeout(m, 9)
	if FlowModCookie(m) != 0x7466000000000001 || FlowModHardTimeout(m) != 9 {
		t.Fatalf("cookie %#x hard timeout %d", FlowModCookie(m), FlowModHardTimeout(m))
	}
	if m[44] != 0 || m[45] != FlagSendFlowRem {
		t.Fatalf("flags bytes %x, want 0001", m[44:46])
	}
}

// A packet-in from a Geneve tunnel carries the options as tun_metadataN
// (NXM_NX_TUN_METADATA0 is NXM1 field 40) with the length the bridge's TLV
// map gives them, and tun_flags (field 104).
func TestDecodeMetadataTunnelOptions(t *testing.T) {
	md := InPortField(1)
	md = append(md, oxm(classNXM1, nxmTunMetadata0, []byte{0, 1, 0, 2})...)
	md = append(md, oxm(classNXM1, nxmTunMetadata0+3, []byte{0xaa})...)
	md = append(md, oxm(classNXM1, nxmTunFlags, []byte{0, 1})...)
	// A masked option keeps only the masked bits.
	masked := oxm(classNXM1, nxmTunMetadata0+5, []byte{0xff, 0xff, 0x0f, 0xf0})
	masked[2] |= 1
	md = append(md, masked...)
	got, err := DecodeMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]byte{0: {0, 1, 0, 2}, 3: {0xaa}, 5: {0x0f, 0xf0}}
	if d := cmp.Diff(want, got.TunMetadata); d != "" {
		t.Errorf("tun_metadata (-want +got):\n%s", d)
	}
	if !got.HasTunFlags || got.TunFlags != 1 {
		t.Errorf("tun_flags %#x (set %v), want 0x1", got.TunFlags, got.HasTunFlags)
	}
}
