package openflow

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// oxmNames names the OXM fields pipelines match on, as ovs-ofctl spells
// them in a flow's match.
var oxmNames = map[uint16]map[uint8]string{
	classOpenFlow: {
		ofbInPort: "in_port", ofbMetadata: "metadata", 3: "dl_dst", 4: "dl_src", ofbEthType: "dl_type", 6: "dl_vlan",
		ofbIPDSCP: "nw_tos", ofbIPECN: "nw_ecn", 10: "nw_proto", 11: "nw_src", 12: "nw_dst", 13: "tp_src", 14: "tp_dst",
		15: "tp_src", 16: "tp_dst", 19: "icmp_type", 20: "icmp_code", 21: "arp_op", 22: "arp_spa", 23: "arp_tpa",
		26: "ipv6_src", 27: "ipv6_dst", 28: "ipv6_label", 29: "icmpv6_type", 30: "icmpv6_code", ofbTunnelID: "tun_id",
	},
	classNXM1: {
		nxmTunID: "tun_id", nxmTunIPv4Src: "tun_src", nxmTunIPv4Dst: "tun_dst", 33: "pkt_mark",
		nxmCtState: "ct_state", nxmCtZone: "ct_zone", nxmCtMark: "ct_mark", nxmCtLabel: "ct_label",
		nxmConjID: "conj_id", nxmTunIPv6Src: "tun_ipv6_src", nxmTunIPv6Dst: "tun_ipv6_dst", nxmCtNwProto: "ct_nw_proto",
		nxmCtNwSrc: "ct_nw_src", nxmCtNwDst: "ct_nw_dst", nxmCtTpSrc: "ct_tp_src", nxmCtTpDst: "ct_tp_dst",
	},
}

// FormatMatch writes a flow's OXM match in ovs-ofctl's words ("in_port=3,
// dl_type=0x0800,nw_dst=10.0.0.5,reg1=0x2/0xff"), field by field in the
// order the match holds them, for a hop whose text OVS's trace did not
// print: the sibling flow the real packet matched. Fields without a name
// here come out as oxm(CLASS:FIELD)=VALUE, never dropped.
func FormatMatch(match []byte) string {
	fs, err := ParseOXM(match)
	parts := make([]string, 0, len(fs)+1)
	for _, f := range fs {
		parts = append(parts, formatField(f))
	}
	if err != nil {
		parts = append(parts, fmt.Sprintf("(unreadable: %v)", err))
	}
	return strings.Join(parts, ",")
}

func formatField(f OXMField) string {
	name := oxmNames[f.Class][f.Field]
	switch {
	case f.Class == classNXM1 && f.Field < 16:
		name = fmt.Sprintf("reg%d", f.Field)
	case f.Class == classPacketRegs:
		name = fmt.Sprintf("xreg%d", f.Field)
	case name == "":
		name = fmt.Sprintf("oxm(%#x:%d)", f.Class, f.Field)
	}
	v := formatValue(name, f.Value)
	if f.Class == classOpenFlow && f.Field == ofbIPDSCP && len(f.Value) == 1 {
		// ovs-ofctl shows the DSCP as nw_tos, the whole TOS byte.
		v = fmt.Sprint(f.Value[0] << 2)
	}
	if f.HasMask {
		return name + "=" + v + "/" + formatValue(name, f.Mask)
	}
	return name + "=" + v
}

func formatValue(name string, v []byte) string {
	switch {
	case len(v) == 6 && strings.HasPrefix(name, "dl_"):
		return net.HardwareAddr(v).String()
	case (len(v) == 4 || len(v) == 16) && isAddressField(name):
		a, _ := netip.AddrFromSlice(v)
		return a.String()
	case (name == "in_port" || name == "conj_id") && len(v) == 4:
		return fmt.Sprint(binary.BigEndian.Uint32(v))
	case len(v) == 2 && (strings.HasPrefix(name, "tp_") || strings.HasPrefix(name, "ct_tp_") || name == "ct_zone"):
		return fmt.Sprint(binary.BigEndian.Uint16(v))
	case len(v) == 1:
		return fmt.Sprint(v[0])
	}
	return fmt.Sprintf("%#x", v)
}

func isAddressField(name string) bool {
	switch name {
	case "nw_src", "nw_dst", "arp_spa", "arp_tpa", "ipv6_src", "ipv6_dst", "tun_src", "tun_dst",
		"tun_ipv6_src", "tun_ipv6_dst", "ct_nw_src", "ct_nw_dst":
		return true
	}
	return false
}
