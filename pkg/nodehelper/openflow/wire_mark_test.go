package openflow

import (
	"bytes"
	"testing"
)

// A marked packet-out sets pkt_mark (NXM_NX_PKT_MARK, class 1, field 33,
// 4 bytes) before its output to the tables; an unmarked one sets nothing.
func TestPacketOutMarked(t *testing.T) {
	setMark := []byte{0x00, 0x01, 33 << 1, 4, 0x80, 0, 0, 0}
	marked, err := PacketOutMarked(7, 3, 0x80000000, []byte{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(marked, setMark) {
		t.Errorf("marked packet-out % x has no set_field of pkt_mark 0x80000000", marked)
	}
	plain, err := PacketOut(7, 3, []byte{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, setMark[:4]) || len(plain) >= len(marked) {
		t.Errorf("unmarked packet-out % x sets a mark", plain)
	}
}
