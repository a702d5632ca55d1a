package openflow

import (
	"encoding/binary"
	"testing"
)

func TestMatchIs(t *testing.T) {
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	cat := func(fs ...[]byte) []byte {
		var b []byte
		for _, f := range fs {
			b = append(b, f...)
		}
		return b
	}
	ip := EthTypeField(0x0800)
	tcp := cat(ip, oxm(classOpenFlow, 10, []byte{6}))
	xreg0 := func(v, m uint64) []byte {
		return maskedOXM(classPacketRegs, 0, binary.BigEndian.AppendUint64(nil, v), binary.BigEndian.AppendUint64(nil, m))
	}
	for name, tc := range map[string]struct {
		match []byte
		text  string
		want  bool
		err   bool
	}{
		"match everything":       {nil, "", true, false},
		"in_port":                {InPortField(3), "in_port=3", true, false},
		"another in_port":        {InPortField(3), "in_port=4", false, false},
		"LOCAL":                  {InPortField(0xfffffffe), "in_port=LOCAL", true, false},
		"protocol shorthand":     {cat(tcp, oxm(classOpenFlow, 14, []byte{0, 80})), "tcp,tp_dst=80", true, false},
		"udp is not tcp":         {cat(tcp, oxm(classOpenFlow, 14, []byte{0, 80})), "udp,tp_dst=80", false, false},
		"field order":            {cat(oxm(classOpenFlow, 12, []byte{10, 0, 0, 5}), ip, InPortField(2)), "ip,in_port=2,nw_dst=10.0.0.5", true, false},
		"missing field":          {cat(ip, InPortField(2)), "ip", false, false},
		"extra field":            {ip, "ip,in_port=2", false, false},
		"prefix":                 {cat(ip, maskedOXM(classOpenFlow, 12, []byte{10, 10, 2, 0}, []byte{255, 255, 255, 0})), "ip,nw_dst=10.10.2.0/24", true, false},
		"other prefix":           {cat(ip, maskedOXM(classOpenFlow, 12, []byte{10, 10, 2, 0}, []byte{255, 255, 255, 0})), "ip,nw_dst=10.10.2.0/23", false, false},
		"dotted mask":            {cat(ip, maskedOXM(classOpenFlow, 11, []byte{10, 0, 0, 0}, []byte{255, 0, 255, 0})), "ip,nw_src=10.0.0.0/255.0.255.0", true, false},
		"register, NXM":          {maskedOXM(classNXM1, 0, u32(4), u32(4)), "reg0=0x4/0x4", true, false},
		"registers, OF1.5 xreg":  {cat(xreg0(0x0000000400000002, 0x0000000fffffffff), ip), "ip,reg0=0x4/0xf,reg1=0x2", true, false},
		"xreg, one half":         {xreg0(0x3, 0xffffffff), "reg1=0x3", true, false},
		"xreg, wrong half":       {xreg0(0x3, 0xffffffff), "reg0=0x3", false, false},
		"full mask is no mask":   {maskedOXM(classNXM1, 1, u32(2), u32(0xffffffff)), "reg1=0x2", true, false},
		"ct_state flags":         {cat(maskedOXM(classNXM1, nxmCtState, u32(0x20), u32(0x21)), ip), "ct_state=-new+trk,ip", true, false},
		"ct_state other flags":   {cat(maskedOXM(classNXM1, nxmCtState, u32(0x20), u32(0x21)), ip), "ct_state=+new+trk,ip", false, false},
		"ct_mark":                {maskedOXM(classNXM1, nxmCtMark, u32(0x10), u32(0x10)), "ct_mark=0x10/0x10", true, false},
		"ct_label":               {maskedOXM(classNXM1, nxmCtLabel, make16(1), make16(1)), "ct_label=0x1/0x1", true, false},
		"conj_id":                {cat(ConjIDField(5), ip), "conj_id=5,ip", true, false},
		"other conj_id":          {cat(ConjIDField(5), ip), "conj_id=6,ip", false, false},
		"nw_tos is the TOS byte": {cat(ip, DSCPField(5)), "ip,nw_tos=20", true, false},
		"MAC":                    {cat(ip, oxm(classOpenFlow, 4, []byte{2, 0, 0x0a, 0x0a, 1, 2})), "ip,dl_src=02:00:0a:0a:01:02", true, false},
		"metadata":               {oxm(classOpenFlow, ofbMetadata, binary.BigEndian.AppendUint64(nil, 2)), "metadata=0x2", true, false},
		"pkt_mark":               {PktMarkField(0x74661000), "pkt_mark=0x74661000", true, false},
		"masked port":            {cat(tcp, maskedOXM(classOpenFlow, 14, []byte{0, 0x50}, []byte{0xff, 0xf0})), "tcp,tp_dst=0x50/0xfff0", true, false},
		"icmpv6 type":            {cat(EthTypeField(0x86dd), oxm(classOpenFlow, 10, []byte{58}), oxm(classOpenFlow, 29, []byte{128})), "icmp6,icmp_type=128", true, false},
		"ipv6 prefix":            {cat(EthTypeField(0x86dd), maskedOXM(classOpenFlow, 27, make16(0), append(make([]byte, 0), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0))), "ipv6,ipv6_dst=::/64", true, false},
		"unknown text field":     {nil, "vlan_tci=0x1000/0x1000", false, true},
		"unknown shorthand":      {nil, "mpls", false, true},
		"unknown OXM field":      {oxm(classOpenFlow, 6, []byte{0x10, 0}), "", false, true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MatchIs(tc.match, tc.text)
			if (err != nil) != tc.err {
				t.Fatalf("MatchIs(%s, %q) error %v, want error %v", FormatMatch(tc.match), tc.text, err, tc.err)
			}
			if got != tc.want {
				t.Errorf("MatchIs(%s, %q) = %v, want %v", FormatMatch(tc.match), tc.text, got, tc.want)
			}
		})
	}
}

func make16(low byte) []byte {
	b := make([]byte, 16)
	b[15] = low
	return b
}

func TestConjunctionsAndConjID(t *testing.T) {
	acts := append(append(ConjunctionAction(Conjunction{ID: 7, Clause: 1, NClauses: 2}), ResubmitAction(3)...),
		ConjunctionAction(Conjunction{ID: 0xf4050003, Clause: 3, NClauses: 3})...)
	inst := append(applyActions(acts), gotoTable(4)...)
	got := Conjunctions(inst)
	want := []Conjunction{{7, 1, 2}, {0xf4050003, 3, 3}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Conjunctions = %+v, want %+v", got, want)
	}
	if c := Conjunctions(applyActions(ResubmitAction(3))); len(c) != 0 {
		t.Errorf("no conjunction expected, got %+v", c)
	}
	m := append(append(EthTypeField(0x800), ConjIDField(9)...), InPortField(2)...)
	if id, ok := ConjIDOf(m); !ok || id != 9 {
		t.Errorf("ConjIDOf = %d, %v", id, ok)
	}
	r, err := WithConjID(m, 0xf4050003)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := ConjIDOf(r); id != 0xf4050003 || FormatMatch(r) != "dl_type=0x0800,conj_id=4093968387,in_port=2" {
		t.Errorf("WithConjID = %s", FormatMatch(r))
	}
	if _, err := WithConjID(EthTypeField(0x800), 1); err == nil {
		t.Error("WithConjID of a match without conj_id: no error")
	}
}

func FuzzMatchIs(f *testing.F) {
	f.Add(append(InPortField(3), EthTypeField(0x0800)...), "ip,in_port=3")
	f.Add([]byte{0x80, 0, 0}, "ct_state=+new-est,tcp_flags=+syn")
	f.Fuzz(func(_ *testing.T, b []byte, s string) { _, _ = MatchIs(b, s) })
}

func TestDecodeTableStats(t *testing.T) {
	b := make([]byte, 48)
	b[0], b[24] = 3, 9
	binary.BigEndian.PutUint32(b[4:], 12)
	got, err := DecodeTableStats(b)
	if err != nil || len(got) != 2 || got[0] != (TableStat{3, 12}) || got[1] != (TableStat{9, 0}) {
		t.Errorf("DecodeTableStats = %+v, %v", got, err)
	}
	if _, err := DecodeTableStats(b[:30]); err == nil {
		t.Error("30 bytes: no error")
	}
}
