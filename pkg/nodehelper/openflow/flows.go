package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	of15 "antrea.io/libOpenflow/openflow15"
)

// FlowDesc is one flow of an OFPMP_FLOW_DESC reply. Match and Instructions
// are kept as raw OpenFlow bytes so that a copy reproduces the flow exactly.
type FlowDesc struct {
	TableID  uint8
	Priority uint16
	Cookie   uint64
	// Match is the OXM fields of the flow's ofp_match, without header and padding.
	Match []byte
	// Instructions is the flow's instruction list.
	Instructions []byte
}

// FlowDescRequest asks for the flows of table (AllTables for every table)
// whose cookie equals cookie under mask.
func FlowDescRequest(xid uint32, table uint8, cookie, mask uint64) []byte {
	body := make([]byte, 40)
	body[0] = table
	binary.BigEndian.PutUint32(body[4:], of15.P_ANY)
	binary.BigEndian.PutUint32(body[8:], of15.OFPG_ANY)
	binary.BigEndian.PutUint64(body[16:], cookie)
	binary.BigEndian.PutUint64(body[24:], mask)
	// An empty ofp_match: type OXM, length 4, padded to 8.
	binary.BigEndian.PutUint16(body[32:], 1)
	binary.BigEndian.PutUint16(body[34:], 4)
	return multipartRequest(xid, multipartFlowDesc, body)
}

// TableFeaturesRequest asks for every table's features (names included).
func TableFeaturesRequest(xid uint32) []byte {
	return multipartRequest(xid, multipartTableFeatures, nil)
}

// TableStatsRequest asks for every table's statistics (OFPMP_TABLE_STATS).
func TableStatsRequest(xid uint32) []byte {
	return multipartRequest(xid, multipartTableStats, nil)
}

// TableStat is a table's id and how many flows it holds.
type TableStat struct {
	ID          uint8
	ActiveCount uint32
}

// DecodeTableStats decodes the body of one OFPMP_TABLE_STATS reply: 24
// bytes per table (table_id, pad, active_count, lookup and matched counts).
func DecodeTableStats(body []byte) ([]TableStat, error) {
	if len(body)%24 != 0 {
		return nil, fmt.Errorf("table stats: %d bytes, not a multiple of 24", len(body))
	}
	var out []TableStat
	for ; len(body) >= 24; body = body[24:] {
		out = append(out, TableStat{ID: body[0], ActiveCount: binary.BigEndian.Uint32(body[4:])})
	}
	return out, nil
}

func multipartRequest(xid uint32, mpType uint16, body []byte) []byte {
	b := make([]byte, 16+len(body))
	b[0] = Version
	b[1] = typeMultipartReq
	binary.BigEndian.PutUint16(b[2:], uint16(len(b))) //nolint:gosec // small
	binary.BigEndian.PutUint32(b[4:], xid)
	binary.BigEndian.PutUint16(b[8:], mpType)
	copy(b[16:], body)
	return b
}

func pad8(n int) int { return (n + 7) &^ 7 }

// DecodeFlowDescs decodes the body of one OFPMP_FLOW_DESC reply message
// (after the 16-byte multipart header).
func DecodeFlowDescs(body []byte) ([]FlowDesc, error) {
	var out []FlowDesc
	for len(body) > 0 {
		if len(body) < 32 {
			return out, fmt.Errorf("flow desc: %w", errShort)
		}
		n := int(binary.BigEndian.Uint16(body))
		if n < 32 || n > len(body) {
			return out, fmt.Errorf("flow desc: bad length %d of %d", n, len(body))
		}
		e := body[:n]
		body = body[n:]
		fd := FlowDesc{
			TableID:  e[4],
			Priority: binary.BigEndian.Uint16(e[6:]),
			Cookie:   binary.BigEndian.Uint64(e[16:]),
		}
		rest := e[24:]
		if len(rest) < 4 {
			return out, fmt.Errorf("flow desc match: %w", errShort)
		}
		mlen := int(binary.BigEndian.Uint16(rest[2:]))
		if mlen < 4 || pad8(mlen) > len(rest) {
			return out, fmt.Errorf("flow desc: bad match length %d", mlen)
		}
		fd.Match = append([]byte(nil), rest[4:mlen]...)
		rest = rest[pad8(mlen):]
		// ofp_stats: reserved(2) length(2) OXS fields, padded to 8.
		if len(rest) < 4 {
			return out, fmt.Errorf("flow desc stats: %w", errShort)
		}
		slen := int(binary.BigEndian.Uint16(rest[2:]))
		if slen < 4 || pad8(slen) > len(rest) {
			return out, fmt.Errorf("flow desc: bad stats length %d", slen)
		}
		fd.Instructions = append([]byte(nil), rest[pad8(slen):]...)
		out = append(out, fd)
	}
	return out, nil
}

// ControllerAction encodes controller(id=ID,userdata=...[,pause]) as
// NXAST_CONTROLLER2, the only form that carries a controller id and userdata.
func ControllerAction(id uint16, userdata []byte, pause bool) ([]byte, error) {
	a := of15.NewNXActionController2()
	a.AddMaxLen(0xffff)
	a.AddControllerID(id)
	a.AddReason(1) // OFPR_ACTION
	a.AddUserdata(userdata)
	if pause {
		a.AddPause(true)
	}
	return a.MarshalBinary()
}

// CopySpec says how to derive an observation flow from an existing flow.
type CopySpec struct {
	Cookie      uint64
	HardTimeout uint16
	// Priority of the copy; the original's plus one, so that the copy wins
	// for the tagged probe only.
	Priority uint16
	// ExtraMatch is OXM fields appended to the original match (the tag).
	ExtraMatch []byte
	// Prepend is actions executed before the original instructions.
	Prepend []byte
	// ReplaceActions, when not nil, replaces the original instructions by an
	// apply-actions instruction holding Prepend and these actions.
	ReplaceActions []byte
}

// CopyFlow builds the FLOW_MOD (add) of a copy of fd as spec says.
func CopyFlow(xid uint32, fd FlowDesc, spec CopySpec) []byte {
	match := append(append([]byte(nil), fd.Match...), spec.ExtraMatch...)
	var inst []byte
	if spec.ReplaceActions != nil {
		inst = applyActions(append(append([]byte(nil), spec.Prepend...), spec.ReplaceActions...))
	} else {
		inst = prependActions(fd.Instructions, spec.Prepend)
	}
	return flowMod(xid, flowModArgs{
		cookie: spec.Cookie, table: fd.TableID, command: of15.FC_ADD,
		hardTimeout: spec.HardTimeout, priority: spec.Priority, match: match, instructions: inst,
	})
}

// NewFlow builds a FLOW_MOD (add) from OXM fields and actions.
func NewFlow(xid uint32, table uint8, priority uint16, cookie uint64, hardTimeout uint16, match, actions []byte) []byte {
	return flowMod(xid, flowModArgs{
		cookie: cookie, table: table, command: of15.FC_ADD, hardTimeout: hardTimeout,
		priority: priority, match: match, instructions: applyActions(actions),
	})
}

// DeleteStrict deletes exactly the flow with this table, priority, match and cookie.
func DeleteStrict(xid uint32, table uint8, priority uint16, cookie uint64, match []byte) []byte {
	return flowMod(xid, flowModArgs{
		cookie: cookie, cookieMask: ^uint64(0), table: table, command: of15.FC_DELETE_STRICT,
		priority: priority, match: match,
	})
}

// FlagSendFlowRem is OFPFF_SEND_FLOW_REM: OVS tells the controllers when
// the flow is removed, and why (see Session.FlowRemoved).
const FlagSendFlowRem = 1 << 0

// FlagCheckOverlap is OFPFF_CHECK_OVERLAP: the switch refuses the flow
// (IsOverlap) where a flow of the same table and priority could match a
// packet it matches, instead of adding it beside or in place of that flow.
const FlagCheckOverlap = 1 << 1

// FlowModFlags returns the flags of an OpenFlow 1.5 FLOW_MOD built by this
// package.
func FlowModFlags(m []byte) uint16 { return binary.BigEndian.Uint16(m[44:]) }

// FlowModMatch returns the OXM fields of an OpenFlow 1.5 FLOW_MOD's match.
func FlowModMatch(m []byte) ([]OXMField, error) {
	if len(m) < 52 {
		return nil, fmt.Errorf("flow mod: %w", errShort)
	}
	n := int(binary.BigEndian.Uint16(m[50:]))
	if n < 4 || 48+n > len(m) {
		return nil, fmt.Errorf("flow mod match length %d beyond %d bytes", n, len(m)-48)
	}
	return ParseOXM(m[52 : 48+n])
}

// IsOverlap reports whether err is the switch refusing a flow with
// FlagCheckOverlap (OFPET_FLOW_MOD_FAILED, OFPFMFC_OVERLAP).
func IsOverlap(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Type == 5 && e.Code == 3
}

// SetFlowModFlags sets the flags of an OpenFlow 1.5 FLOW_MOD built by this
// package.
func SetFlowModFlags(m []byte, flags uint16) { binary.BigEndian.PutUint16(m[44:], flags) }

// FlowModCookie returns the cookie of an OpenFlow 1.5 FLOW_MOD.
func FlowModCookie(m []byte) uint64 { return binary.BigEndian.Uint64(m[8:]) }

// FlowModHardTimeout returns the hard timeout of an OpenFlow 1.5 FLOW_MOD.
func FlowModHardTimeout(m []byte) uint16 { return binary.BigEndian.Uint16(m[28:]) }

// SetFlowModHardTimeout sets the hard timeout of an OpenFlow 1.5 FLOW_MOD.
func SetFlowModHardTimeout(m []byte, seconds uint16) { binary.BigEndian.PutUint16(m[28:], seconds) }

type flowModArgs struct {
	cookie, cookieMask uint64
	table, command     uint8
	hardTimeout        uint16
	priority           uint16
	match              []byte
	instructions       []byte
}

func flowMod(xid uint32, a flowModArgs) []byte {
	m := encodeMatch(a.match)
	b := make([]byte, 48, 48+len(m)+len(a.instructions))
	b[0] = Version
	b[1] = typeFlowMod
	binary.BigEndian.PutUint32(b[4:], xid)
	binary.BigEndian.PutUint64(b[8:], a.cookie)
	binary.BigEndian.PutUint64(b[16:], a.cookieMask)
	b[24] = a.table
	b[25] = a.command
	binary.BigEndian.PutUint16(b[28:], a.hardTimeout)
	binary.BigEndian.PutUint16(b[30:], a.priority)
	binary.BigEndian.PutUint32(b[32:], 0xffffffff) // buffer_id: none
	binary.BigEndian.PutUint32(b[36:], of15.P_ANY)
	binary.BigEndian.PutUint32(b[40:], of15.OFPG_ANY)
	b = append(b, m...)
	b = append(b, a.instructions...)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b))) //nolint:gosec // a flow mod is < 64 KiB
	return b
}

// encodeMatch wraps OXM fields in an ofp_match header, padded to 8.
func encodeMatch(fields []byte) []byte {
	n := 4 + len(fields)
	b := make([]byte, pad8(n))
	binary.BigEndian.PutUint16(b, 1)             // OFPMT_OXM
	binary.BigEndian.PutUint16(b[2:], uint16(n)) //nolint:gosec // small
	copy(b[4:], fields)
	return b
}

func applyActions(actions []byte) []byte {
	b := make([]byte, 8, 8+len(actions))
	binary.BigEndian.PutUint16(b, instApplyActions)
	binary.BigEndian.PutUint16(b[2:], uint16(8+len(actions))) //nolint:gosec // small
	return append(b, actions...)
}

// prependActions puts actions in front of the apply-actions instruction of
// inst (OVS runs apply-actions before write-actions and goto-table), adding
// one where the flow has none.
func prependActions(inst, actions []byte) []byte {
	if len(actions) == 0 {
		return append([]byte(nil), inst...)
	}
	for off := 0; off+4 <= len(inst); {
		t := binary.BigEndian.Uint16(inst[off:])
		l := int(binary.BigEndian.Uint16(inst[off+2:]))
		if l < 4 || off+l > len(inst) {
			break
		}
		if t == instApplyActions && l >= 8 {
			old := inst[off+8 : off+l]
			out := append([]byte(nil), inst[:off]...)
			out = append(out, applyActions(append(append([]byte(nil), actions...), old...))...)
			return append(out, inst[off+l:]...)
		}
		off += l
	}
	return append(applyActions(actions), inst...)
}

// ResubmitAction encodes resubmit(,table) (NXAST_RESUBMIT_TABLE with
// in_port OFPP_IN_PORT, i.e. the packet's own in_port).
func ResubmitAction(table uint8) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint16(b, 0xffff)
	binary.BigEndian.PutUint16(b[2:], 16)
	binary.BigEndian.PutUint32(b[4:], nxVendorID)
	binary.BigEndian.PutUint16(b[8:], 14)
	binary.BigEndian.PutUint16(b[10:], 0xfff8)
	b[12] = table
	return b
}

// SetTunnelActions sets the tunnel metadata in md with set_field actions
// (tun_id, and the tunnel source and destination of either family): how a
// flow puts back tunnel fields that the pipeline set before a packet was
// paused, where handing them in as the packet's input metadata would make
// them look like a tunnel it arrived from.
func SetTunnelActions(md Metadata) []byte {
	var b []byte
	if md.HasTunID {
		b = append(b, SetFieldAction(oxm(classOpenFlow, ofbTunnelID, binary.BigEndian.AppendUint64(nil, md.TunID)))...)
	}
	for _, f := range []struct {
		a      netip.Addr
		v4, v6 uint8
	}{{md.TunSrc, nxmTunIPv4Src, nxmTunIPv6Src}, {md.TunDst, nxmTunIPv4Dst, nxmTunIPv6Dst}} {
		switch {
		case f.a.Is4():
			a := f.a.As4()
			b = append(b, SetFieldAction(oxm(classNXM1, f.v4, a[:]))...)
		case f.a.IsValid() && !f.a.IsUnspecified():
			a := f.a.As16()
			b = append(b, SetFieldAction(oxm(classNXM1, f.v6, a[:]))...)
		}
	}
	return b
}

// NoFlowRemoved is an OpenFlow 1.5 OFPT_SET_ASYNC that stops OVS sending
// this connection OFPT_FLOW_REMOVED messages, in whatever role it has
// (the properties OFPACPT_FLOW_REMOVED_SLAVE and _MASTER, mask 0; the
// other asynchronous messages are left as they are). OVS otherwise sends
// every connection a message for every flow with OFPFF_SEND_FLOW_REM that
// anyone removes.
func NoFlowRemoved(xid uint32) []byte {
	b := make([]byte, 8+2*8)
	b[0], b[1] = Version, typeSetAsync
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint32(b[4:], xid)
	for i, prop := range []uint16{4, 5} {
		o := 8 + 8*i
		binary.BigEndian.PutUint16(b[o:], prop)
		binary.BigEndian.PutUint16(b[o+2:], 8)
	}
	return b
}
