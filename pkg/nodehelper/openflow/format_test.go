package openflow

import (
	"encoding/binary"
	"testing"
)

func TestFormatMatch(t *testing.T) {
	for name, tc := range map[string]struct {
		match []byte
		want  string
	}{
		"empty": {nil, ""},
		"port, type, tag": {append(append(InPortField(3), EthTypeField(0x0800)...), DSCPField(5)...),
			"in_port=3,dl_type=0x0800,nw_tos=20"},
		"addresses and ports": {append(append(oxm(classOpenFlow, 12, []byte{10, 0, 0, 5}), oxm(classOpenFlow, 14, []byte{0, 80})...),
			oxm(classOpenFlow, 4, []byte{2, 0, 0, 0, 0, 1})...), "nw_dst=10.0.0.5,tp_dst=80,dl_src=02:00:00:00:00:01"},
		"masked register": {maskedOXM(classNXM1, 1, []byte{0, 0, 0, 2}, []byte{0, 0, 0, 0xff}), "reg1=0x00000002/0x000000ff"},
		"conntrack": {append(maskedOXM(classNXM1, nxmCtState, binary.BigEndian.AppendUint32(nil, 0x21), binary.BigEndian.AppendUint32(nil, 0x21)),
			PktMarkField(7)...), "ct_state=0x00000021/0x00000021,pkt_mark=0x00000007"},
		"unknown field":  {oxm(classOpenFlow, 40, []byte{1, 2}), "oxm(0x8000:40)=0x0102"},
		"truncated tail": {[]byte{0x80, 0, 0}, "(unreadable: oxm header: message too short)"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := FormatMatch(tc.match); got != tc.want {
				t.Errorf("FormatMatch = %q, want %q", got, tc.want)
			}
		})
	}
}

func maskedOXM(class uint16, field uint8, value, mask []byte) []byte {
	b := oxm(class, field, append(append([]byte(nil), value...), mask...))
	b[2] |= 1
	return b
}

func FuzzFormatMatch(f *testing.F) {
	f.Add(append(InPortField(3), EthTypeField(0x0800)...))
	f.Add([]byte{0x80, 0, 0})
	f.Fuzz(func(_ *testing.T, b []byte) { _ = FormatMatch(b) })
}
