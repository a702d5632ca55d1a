package openflow

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"
)

// A flow's match in a form in which the two ways OVS shows it can be
// compared: the OXM fields of an OFPMP_FLOW_DESC reply, and the text that
// ofproto/trace prints for the flow a packet matched (OVS's match_format,
// as ovs-ofctl dump-flows prints it: "tcp,reg1=0x4,nw_dst=10.0.0.5").
// Each field becomes name -> value/mask at the field's width, the value
// already masked and a missing mask written as all ones, so that
// "tcp,tp_dst=80" and eth_type 0x0800, ip_proto 6, tcp_dst 80 come out
// equal. Fields outside the list below are errors on either side: a
// caller that cannot tell two matches apart must not claim they are equal.
type canonMatch map[string]string

// canonField is a field's canonical name and width in bytes.
type canonField struct {
	name  string
	width int
}

// oxmCanon maps an OXM class and field to its canonical field. TCP, UDP
// and SCTP ports share tp_src and tp_dst (ip_proto tells them apart), as
// ICMPv4 and ICMPv6 type and code share icmp_type and icmp_code, as OVS's
// text does.
var oxmCanon = map[uint16]map[uint8]canonField{
	classOpenFlow: {
		ofbInPort: {"in_port", 4}, ofbMetadata: {"metadata", 8}, 3: {"dl_dst", 6}, 4: {"dl_src", 6},
		ofbEthType: {"dl_type", 2}, ofbIPDSCP: {"ip_dscp", 1}, ofbIPECN: {"nw_ecn", 1}, 10: {"nw_proto", 1},
		11: {"nw_src", 4}, 12: {"nw_dst", 4}, 13: {"tp_src", 2}, 14: {"tp_dst", 2}, 15: {"tp_src", 2},
		16: {"tp_dst", 2}, 17: {"tp_src", 2}, 18: {"tp_dst", 2}, 19: {"icmp_type", 1}, 20: {"icmp_code", 1},
		21: {"arp_op", 2}, 22: {"arp_spa", 4}, 23: {"arp_tpa", 4}, 24: {"arp_sha", 6}, 25: {"arp_tha", 6},
		26: {"ipv6_src", 16}, 27: {"ipv6_dst", 16}, 28: {"ipv6_label", 4}, 29: {"icmp_type", 1},
		30: {"icmp_code", 1}, ofbTunnelID: {"tun_id", 8}, 42: {"tcp_flags", 2},
	},
	classNXM1: {
		nxmTunID: {"tun_id", 8}, nxmTunIPv4Src: {"tun_src", 4}, nxmTunIPv4Dst: {"tun_dst", 4},
		33: {"pkt_mark", 4}, 34: {"tcp_flags", 2}, nxmConjID: {"conj_id", 4},
		nxmCtState: {"ct_state", 4}, nxmCtZone: {"ct_zone", 2}, nxmCtMark: {"ct_mark", 4}, nxmCtLabel: {"ct_label", 16},
		nxmTunIPv6Src: {"tun_ipv6_src", 16}, nxmTunIPv6Dst: {"tun_ipv6_dst", 16}, nxmCtNwProto: {"ct_nw_proto", 1},
		nxmCtNwSrc: {"ct_nw_src", 4}, nxmCtNwDst: {"ct_nw_dst", 4}, nxmCtIPv6Src: {"ct_ipv6_src", 16},
		nxmCtIPv6Dst: {"ct_ipv6_dst", 16}, nxmCtTpSrc: {"ct_tp_src", 2}, nxmCtTpDst: {"ct_tp_dst", 2},
	},
}

// textWidth is the width of each field name OVS's text may use.
var textWidth = func() map[string]int {
	m := map[string]int{}
	for _, fs := range oxmCanon {
		for _, f := range fs {
			m[f.name] = f.width
		}
	}
	for i := 0; i < 16; i++ {
		m[fmt.Sprintf("reg%d", i)] = 4
	}
	return m
}()

// Shorthands OVS prints for an Ethernet type and IP protocol.
var shorthands = map[string][2]int{
	"ip": {0x0800, -1}, "ipv6": {0x86dd, -1}, "arp": {0x0806, -1}, "rarp": {0x8035, -1},
	"tcp": {0x0800, 6}, "udp": {0x0800, 17}, "sctp": {0x0800, 132}, "icmp": {0x0800, 1},
	"tcp6": {0x86dd, 6}, "udp6": {0x86dd, 17}, "sctp6": {0x86dd, 132}, "icmp6": {0x86dd, 58},
}

// Flag names OVS prints in ct_state and tcp_flags ("+new-est+trk").
var flagBits = map[string]map[string]uint32{
	"ct_state":  {"new": 0x01, "est": 0x02, "rel": 0x04, "rpl": 0x08, "inv": 0x10, "trk": 0x20, "snat": 0x40, "dnat": 0x80},
	"tcp_flags": {"fin": 0x1, "syn": 0x2, "rst": 0x4, "psh": 0x8, "ack": 0x10, "urg": 0x20, "ece": 0x40, "cwr": 0x80, "ns": 0x100},
}

func (c canonMatch) put(name string, value, mask []byte) error {
	if mask == nil {
		mask = make([]byte, len(value))
		for i := range mask {
			mask[i] = 0xff
		}
	}
	if len(mask) != len(value) {
		return fmt.Errorf("%s: value and mask of different lengths", name)
	}
	v := make([]byte, len(value))
	zero := true
	for i := range value {
		v[i] = value[i] & mask[i]
		if mask[i] != 0 {
			zero = false
		}
	}
	if zero {
		// A field matched under an all-zero mask is not matched at all.
		return nil
	}
	if _, dup := c[name]; dup {
		return fmt.Errorf("%s matched twice", name)
	}
	c[name] = hex.EncodeToString(v) + "/" + hex.EncodeToString(mask)
	return nil
}

// canonOXM reads OXM fields into their canonical form.
func canonOXM(match []byte) (canonMatch, error) {
	fs, err := ParseOXM(match)
	if err != nil {
		return nil, err
	}
	c := canonMatch{}
	for _, f := range fs {
		var mask []byte
		if f.HasMask {
			mask = f.Mask
		}
		switch {
		case f.Class == classNXM1 && f.Field < 16 && len(f.Value) == 4:
			err = c.put(fmt.Sprintf("reg%d", f.Field), f.Value, mask)
		case f.Class == classPacketRegs && f.Field < 8 && len(f.Value) == 8:
			// xregN holds reg2N in its high half and reg2N+1 in its low one
			// (OVS sends registers this way in OpenFlow 1.5).
			if mask == nil {
				mask = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			}
			if err = c.put(fmt.Sprintf("reg%d", 2*f.Field), f.Value[:4], mask[:4]); err == nil {
				err = c.put(fmt.Sprintf("reg%d", 2*f.Field+1), f.Value[4:], mask[4:])
			}
		default:
			cf, ok := oxmCanon[f.Class][f.Field]
			if !ok || len(f.Value) != cf.width {
				return nil, fmt.Errorf("field oxm(%#x:%d) of %d bytes is not one the helper compares", f.Class, f.Field, len(f.Value))
			}
			err = c.put(cf.name, f.Value, mask)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// canonText reads a match as OVS's match_format writes it.
func canonText(s string) (canonMatch, error) {
	c := canonMatch{}
	s = strings.TrimSpace(s)
	if s == "" {
		return c, nil
	}
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		name, val, hasVal := strings.Cut(tok, "=")
		if !hasVal {
			sh, ok := shorthands[tok]
			if !ok {
				return nil, fmt.Errorf("%q is not a protocol the helper knows", tok)
			}
			if err := c.put("dl_type", binary.BigEndian.AppendUint16(nil, uint16(sh[0])), nil); err != nil { //nolint:gosec // table above
				return nil, err
			}
			if sh[1] >= 0 {
				if err := c.put("nw_proto", []byte{byte(sh[1])}, nil); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := c.putText(name, val); err != nil {
			return nil, fmt.Errorf("%s: %w", tok, err)
		}
	}
	return c, nil
}

func (c canonMatch) putText(name, val string) error {
	switch name {
	case "nw_tos":
		// The whole TOS byte; the OXM field is the DSCP, its top six bits.
		v, m, err := textNumber(val, 1)
		if err != nil || m != nil {
			return fmt.Errorf("want a TOS byte")
		}
		return c.put("ip_dscp", []byte{v[0] >> 2}, nil)
	case "in_port":
		var p uint32
		switch val {
		case "LOCAL":
			p = PortNumber(0xfffe)
		default:
			v, m, err := textNumber(val, 2)
			if err != nil || m != nil {
				return fmt.Errorf("want a port number")
			}
			p = PortNumber(int(binary.BigEndian.Uint16(v)))
		}
		return c.put(name, binary.BigEndian.AppendUint32(nil, p), nil)
	case "ct_state", "tcp_flags":
		if strings.HasPrefix(val, "+") || strings.HasPrefix(val, "-") {
			return c.putFlags(name, val)
		}
	}
	w, ok := textWidth[name]
	if !ok {
		return fmt.Errorf("not a field the helper compares")
	}
	v, m, err := textValue(name, val, w)
	if err != nil {
		return err
	}
	return c.put(name, v, m)
}

func (c canonMatch) putFlags(name, val string) error {
	var v, m uint32
	for val != "" {
		set := val[0] == '+'
		if val[0] != '+' && val[0] != '-' {
			return fmt.Errorf("flags: want +name or -name at %q", val)
		}
		val = val[1:]
		end := strings.IndexAny(val, "+-")
		if end < 0 {
			end = len(val)
		}
		bit, ok := flagBits[name][val[:end]]
		if !ok {
			return fmt.Errorf("unknown flag %q", val[:end])
		}
		m |= bit
		if set {
			v |= bit
		}
		val = val[end:]
	}
	w := textWidth[name]
	vb, mb := make([]byte, 4), make([]byte, 4)
	binary.BigEndian.PutUint32(vb, v)
	binary.BigEndian.PutUint32(mb, m)
	return c.put(name, vb[4-w:], mb[4-w:])
}

// textValue reads value[/mask] of a field of width w bytes: a MAC, an
// address with a prefix length or a mask, or a number in decimal or hex.
func textValue(name, s string, w int) ([]byte, []byte, error) {
	val, mask, masked := strings.Cut(s, "/")
	switch {
	case w == 6 && strings.Contains(val, ":"):
		v, err := net.ParseMAC(val)
		if err != nil || len(v) != 6 {
			return nil, nil, fmt.Errorf("want a MAC address")
		}
		if !masked {
			return v, nil, nil
		}
		m, err := net.ParseMAC(mask)
		if err != nil || len(m) != 6 {
			return nil, nil, fmt.Errorf("want a MAC mask")
		}
		return v, m, nil
	case (w == 4 || w == 16) && isAddressName(name):
		a, err := netip.ParseAddr(val)
		if err != nil || a.BitLen() != 8*w {
			return nil, nil, fmt.Errorf("want an IPv%d address", map[int]int{4: 4, 16: 6}[w])
		}
		if !masked {
			return a.AsSlice(), nil, nil
		}
		if m, err := netip.ParseAddr(mask); err == nil && m.BitLen() == a.BitLen() {
			return a.AsSlice(), m.AsSlice(), nil
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, nil, fmt.Errorf("want an address/prefix or address/mask")
		}
		m := make([]byte, w)
		for i := 0; i < pfx.Bits(); i++ {
			m[i/8] |= 0x80 >> (i % 8)
		}
		return a.AsSlice(), m, nil
	}
	v, _, err := textNumber(val, w)
	if err != nil {
		return nil, nil, err
	}
	if !masked {
		return v, nil, nil
	}
	m, _, err := textNumber(mask, w)
	return v, m, err
}

// textNumber reads a decimal or 0x-hexadecimal number of at most w bytes.
func textNumber(s string, w int) ([]byte, []byte, error) {
	if strings.Contains(s, "/") {
		v, m, _ := strings.Cut(s, "/")
		vb, _, err := textNumber(v, w)
		if err != nil {
			return nil, nil, err
		}
		mb, _, err := textNumber(m, w)
		return vb, mb, err
	}
	n := new(big.Int)
	var ok bool
	if h, isHex := strings.CutPrefix(s, "0x"); isHex {
		_, ok = n.SetString(h, 16)
	} else {
		_, ok = n.SetString(s, 10)
	}
	if !ok || n.Sign() < 0 || n.BitLen() > 8*w {
		return nil, nil, fmt.Errorf("want a number of at most %d bits, not %q", 8*w, s)
	}
	return n.FillBytes(make([]byte, w)), nil, nil
}

func isAddressName(name string) bool {
	return isAddressField(name) || name == "ct_ipv6_src" || name == "ct_ipv6_dst"
}

// MatchIs reports whether the OXM fields of a flow are the match OVS
// printed as text (a hop of ofproto/trace). An error says that one of the
// two holds a field the helper does not compare, so it cannot tell.
func MatchIs(match []byte, text string) (bool, error) {
	a, err := canonOXM(match)
	if err != nil {
		return false, fmt.Errorf("flow's match: %w", err)
	}
	b, err := canonText(text)
	if err != nil {
		return false, fmt.Errorf("match %q: %w", text, err)
	}
	if len(a) != len(b) {
		return false, nil
	}
	for k, v := range a {
		if b[k] != v {
			return false, nil
		}
	}
	return true, nil
}
