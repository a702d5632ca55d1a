package openflow

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// OXM classes.
const (
	classNXM0         = 0x0000
	classNXM1         = 0x0001
	classOpenFlow     = 0x8000
	classPacketRegs   = 0x8001
	classExperimenter = 0xffff
)

// OpenFlow basic fields used here.
const (
	ofbInPort   = 0
	ofbMetadata = 2
	ofbEthType  = 5
	ofbIPDSCP   = 8
	ofbIPECN    = 9
	ofbTunnelID = 38
)

// Nicira fields decoded from packet-in metadata.
const (
	nxmTunID = 16
	// nxmTunMetadata0 is NXM_NX_TUN_METADATA0; 1..63 follow it. Each holds
	// one Geneve option as the bridge's TLV map places it (OVN keeps its
	// logical ingress and egress ports in tun_metadata0).
	nxmTunMetadata0 = 40
	nxmTunFlags     = 104
	nxmTunIPv4Src   = 31
	nxmTunIPv4Dst   = 32
	nxmCtState      = 105
	nxmCtZone       = 106
	nxmCtMark       = 107
	nxmCtLabel      = 108
	nxmTunIPv6Src   = 109
	nxmTunIPv6Dst   = 110
	nxmCtNwProto    = 119
	nxmCtNwSrc      = 120
	nxmCtNwDst      = 121
	nxmCtIPv6Src    = 122
	nxmCtIPv6Dst    = 123
	nxmCtTpSrc      = 124
	nxmCtTpDst      = 125
)

// OXMField is one decoded OXM TLV.
type OXMField struct {
	Class   uint16
	Field   uint8
	HasMask bool
	// Experimenter is set for class 0xffff.
	Experimenter uint32
	Value        []byte
	Mask         []byte
}

func oxm(class uint16, field uint8, value []byte) []byte {
	b := make([]byte, 4, 4+len(value))
	binary.BigEndian.PutUint16(b, class)
	b[2] = field << 1
	b[3] = byte(len(value))
	return append(b, value...)
}

// PortNumber maps an OVSDB ofport to its OpenFlow 1.1+ number: OVSDB (and
// OpenFlow 1.0) call the bridge's own port LOCAL 65534, OpenFlow 1.5 calls
// it 0xfffffffe and refuses 65534 in a match.
func PortNumber(ofport int) uint32 {
	if ofport == 0xfffe {
		return 0xfffffffe
	}
	return uint32(ofport) //nolint:gosec // OVSDB ofports are below 65280 but for LOCAL
}

// InPortField is OXM_OF_IN_PORT.
func InPortField(port uint32) []byte {
	return oxm(classOpenFlow, ofbInPort, binary.BigEndian.AppendUint32(nil, port))
}

// EthTypeField is OXM_OF_ETH_TYPE.
func EthTypeField(ethType uint16) []byte {
	return oxm(classOpenFlow, ofbEthType, binary.BigEndian.AppendUint16(nil, ethType))
}

// DSCPField is OXM_OF_IP_DSCP (the six DSCP bits, not the TOS byte).
func DSCPField(dscp uint8) []byte {
	return oxm(classOpenFlow, ofbIPDSCP, []byte{dscp & 0x3f})
}

// ECNField is OXM_OF_IP_ECN (the two ECN bits of the TOS byte).
func ECNField(ecn uint8) []byte {
	return oxm(classOpenFlow, ofbIPECN, []byte{ecn & 3})
}

// ParseOXM splits a list of OXM TLVs.
func ParseOXM(b []byte) ([]OXMField, error) {
	var out []OXMField
	for len(b) > 0 {
		if len(b) < 4 {
			return out, fmt.Errorf("oxm header: %w", errShort)
		}
		f := OXMField{
			Class:   binary.BigEndian.Uint16(b),
			Field:   b[2] >> 1,
			HasMask: b[2]&1 == 1,
		}
		n := int(b[3])
		if 4+n > len(b) {
			return out, fmt.Errorf("oxm field %#x:%d: length %d beyond %d bytes", f.Class, f.Field, n, len(b)-4)
		}
		v := b[4 : 4+n]
		b = b[4+n:]
		if f.Class == classExperimenter {
			if len(v) < 4 {
				return out, fmt.Errorf("oxm experimenter: %w", errShort)
			}
			f.Experimenter = binary.BigEndian.Uint32(v)
			v = v[4:]
		}
		if f.HasMask {
			if len(v)%2 != 0 {
				return out, fmt.Errorf("oxm field %#x:%d: odd masked length", f.Class, f.Field)
			}
			f.Value, f.Mask = v[:len(v)/2], v[len(v)/2:]
		} else {
			f.Value = v
		}
		out = append(out, f)
	}
	return out, nil
}

// HasField reports whether the OXM list carries an OpenFlow basic field.
func HasField(match []byte, field uint8) bool {
	fs, _ := ParseOXM(match)
	for _, f := range fs {
		if f.Class == classOpenFlow && f.Field == field {
			return true
		}
	}
	return false
}

// EthTypeOf returns the eth_type a match requires, or 0.
func EthTypeOf(match []byte) uint16 {
	fs, _ := ParseOXM(match)
	for _, f := range fs {
		if f.Class == classOpenFlow && f.Field == ofbEthType && len(f.Value) == 2 {
			return binary.BigEndian.Uint16(f.Value)
		}
	}
	return 0
}

// HasDSCP reports whether a match already constrains ip_dscp.
func HasDSCP(match []byte) bool { return HasField(match, ofbIPDSCP) }

// HasECN reports whether a match holds the IP ECN field.
func HasECN(match []byte) bool { return HasField(match, ofbIPECN) }

// Metadata is the pipeline state that an NXT_PACKET_IN2 carries.
type Metadata struct {
	InPort  uint32
	Regs    [16]uint32
	RegsSet uint16
	TunID   uint64
	TunSrc  netip.Addr
	TunDst  netip.Addr
	CtState uint32
	CtZone  uint16
	CtMark  uint32
	// CtLabel is the 128-bit conntrack label, high byte first.
	CtLabel [16]byte
	// CtNwSrc, CtNwDst, CtNwProto, CtTpSrc and CtTpDst are the original
	// direction's tuple of the packet's connection.
	CtNwSrc   netip.Addr
	CtNwDst   netip.Addr
	CtNwProto uint8
	CtTpSrc   uint16
	CtTpDst   uint16
	HasTunID  bool
	// Meta is the OpenFlow metadata register (OVN keeps the logical
	// datapath there); HasMeta says the packet-in carried it.
	Meta    uint64
	HasMeta bool
	// TunMetadata holds the Geneve options the packet arrived with, by
	// tun_metadata index, as many bytes as the bridge's TLV map gives the
	// option; TunFlags is NXM_NX_TUN_FLAGS (bit 0: OAM).
	TunMetadata map[int][]byte
	TunFlags    uint16
	HasTunFlags bool
}

// DecodeMetadata reads the fields of a packet-in's metadata that the helper
// uses; unknown fields are skipped.
func DecodeMetadata(b []byte) (Metadata, error) {
	var m Metadata
	fs, err := ParseOXM(b)
	for _, f := range fs {
		v := f.Value
		switch {
		case f.Class == classOpenFlow && f.Field == ofbInPort && len(v) == 4:
			m.InPort = binary.BigEndian.Uint32(v)
		case f.Class == classOpenFlow && f.Field == ofbMetadata && len(v) == 8:
			m.Meta, m.HasMeta = binary.BigEndian.Uint64(v), true
		case f.Class == classOpenFlow && f.Field == ofbTunnelID && len(v) == 8,
			f.Class == classNXM1 && f.Field == nxmTunID && len(v) == 8:
			m.TunID, m.HasTunID = binary.BigEndian.Uint64(v), true
		case f.Class == classNXM1 && f.Field < 16 && len(v) == 4:
			m.Regs[f.Field] = binary.BigEndian.Uint32(v)
			m.RegsSet |= 1 << f.Field
		case f.Class == classPacketRegs && f.Field < 8 && len(v) == 8:
			m.Regs[2*f.Field] = binary.BigEndian.Uint32(v)
			m.Regs[2*f.Field+1] = binary.BigEndian.Uint32(v[4:])
			m.RegsSet |= 3 << (2 * f.Field)
		case f.Class == classNXM1 && (f.Field == nxmTunIPv4Src || f.Field == nxmTunIPv6Src):
			m.TunSrc, _ = netip.AddrFromSlice(v)
		case f.Class == classNXM1 && (f.Field == nxmTunIPv4Dst || f.Field == nxmTunIPv6Dst):
			m.TunDst, _ = netip.AddrFromSlice(v)
		case f.Class == classNXM1 && f.Field == nxmCtState && len(v) == 4:
			m.CtState = binary.BigEndian.Uint32(v)
		case f.Class == classNXM1 && f.Field == nxmCtZone && len(v) == 2:
			m.CtZone = binary.BigEndian.Uint16(v)
		case f.Class == classNXM1 && f.Field == nxmCtMark && len(v) == 4:
			m.CtMark = binary.BigEndian.Uint32(v)
		case f.Class == classNXM1 && f.Field == nxmCtLabel && len(v) == 16:
			copy(m.CtLabel[:], v)
		case f.Class == classNXM1 && (f.Field == nxmCtNwSrc || f.Field == nxmCtIPv6Src):
			m.CtNwSrc, _ = netip.AddrFromSlice(v)
		case f.Class == classNXM1 && (f.Field == nxmCtNwDst || f.Field == nxmCtIPv6Dst):
			m.CtNwDst, _ = netip.AddrFromSlice(v)
		case f.Class == classNXM1 && f.Field == nxmCtNwProto && len(v) == 1:
			m.CtNwProto = v[0]
		case f.Class == classNXM1 && f.Field == nxmCtTpSrc && len(v) == 2:
			m.CtTpSrc = binary.BigEndian.Uint16(v)
		case f.Class == classNXM1 && f.Field == nxmCtTpDst && len(v) == 2:
			m.CtTpDst = binary.BigEndian.Uint16(v)
		case f.Class == classNXM1 && f.Field >= nxmTunMetadata0 && f.Field < nxmTunMetadata0+64 && len(v) > 0:
			val := append([]byte(nil), v...)
			for i := range val {
				if f.HasMask && i < len(f.Mask) {
					val[i] &= f.Mask[i]
				}
			}
			if m.TunMetadata == nil {
				m.TunMetadata = map[int][]byte{}
			}
			m.TunMetadata[int(f.Field-nxmTunMetadata0)] = val
		case f.Class == classNXM1 && f.Field == nxmTunFlags && len(v) == 2:
			m.TunFlags, m.HasTunFlags = binary.BigEndian.Uint16(v), true
		}
	}
	return m, err
}

// XReg7BitClearField matches OXM_OF_PKT_REG7 (OVS's xreg7, 64 bits) with
// the given bit clear. A packet enters a bridge with its registers zero,
// so in table 0 it matches every packet that arrives, while two such
// fields with different bits are different matches.
func XReg7BitClearField(bit uint8) []byte {
	return encodeOXM(OXMField{Class: classPacketRegs, Field: 7, HasMask: true,
		Value: make([]byte, 8), Mask: binary.BigEndian.AppendUint64(nil, 1<<(bit&63))})
}

// XReg7BitSetField is OXM_OF_PKT_REG7 with only the given bit set, under
// a mask of that bit: as a set_field, it sets that bit and leaves the
// rest of the register alone.
func XReg7BitSetField(bit uint8) []byte {
	b := binary.BigEndian.AppendUint64(nil, 1<<(bit&63))
	return encodeOXM(OXMField{Class: classPacketRegs, Field: 7, HasMask: true, Value: b, Mask: b})
}

// PktMarkField is NXM_NX_PKT_MARK.
func PktMarkField(mark uint32) []byte {
	return oxm(classNXM1, 33, binary.BigEndian.AppendUint32(nil, mark))
}

// SetFieldAction encodes OFPAT_SET_FIELD for one OXM field.
func SetFieldAction(field []byte) []byte {
	n := pad8(4 + len(field))
	b := make([]byte, n)
	binary.BigEndian.PutUint16(b, 25)            // OFPAT_SET_FIELD
	binary.BigEndian.PutUint16(b[2:], uint16(n)) //nolint:gosec // small
	copy(b[4:], field)
	return b
}

// encodeOXM writes a decoded OXM field back.
func encodeOXM(f OXMField) []byte {
	body := append([]byte(nil), f.Value...)
	if f.HasMask {
		body = append(body, f.Mask...)
	}
	if f.Class == classExperimenter {
		body = append(binary.BigEndian.AppendUint32(nil, f.Experimenter), body...)
	}
	b := oxm(f.Class, f.Field, body)
	if f.HasMask {
		b[2] |= 1
	}
	return b
}

// IPProtoField is OXM_OF_IP_PROTO; it needs an IPv4 or IPv6 eth_type
// before it.
func IPProtoField(proto uint8) []byte { return oxm(classOpenFlow, 10, []byte{proto}) }

// IPDstField is OXM_OF_IPV4_DST or OXM_OF_IPV6_DST, by a's family.
func IPDstField(a netip.Addr) []byte {
	if a.Is4() {
		return oxm(classOpenFlow, 12, a.AsSlice())
	}
	return oxm(classOpenFlow, 27, a.AsSlice())
}

// L4DstField is OXM_OF_TCP_DST (proto 6) or OXM_OF_UDP_DST (17); it
// needs the IP protocol before it.
func L4DstField(proto uint8, port uint16) []byte {
	field := uint8(14)
	if proto == 17 {
		field = 16
	}
	return oxm(classOpenFlow, field, binary.BigEndian.AppendUint16(nil, port))
}

// ICMPTypeField is OXM_OF_ICMPV4_TYPE, or OXM_OF_ICMPV6_TYPE for v6.
func ICMPTypeField(v6 bool, typ uint8) []byte {
	if v6 {
		return oxm(classOpenFlow, 29, []byte{typ})
	}
	return oxm(classOpenFlow, 19, []byte{typ})
}

// SetDSCPAction sets the IP DSCP (the ECN bits stay).
func SetDSCPAction(dscp uint8) []byte { return SetFieldAction(DSCPField(dscp)) }
