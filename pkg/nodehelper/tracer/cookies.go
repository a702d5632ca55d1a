package tracer

import (
	"encoding/binary"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// Cookie layout: bits 63-48 a fixed marker, 47-40 the tag, 39-8 random,
// 7-0 the kind of flow. All of a trace's flows share the bits above the
// kind, so one delete with cookieMask clears them.
const (
	cookieMarker = uint64(0x7466) << 48 // "tf"
	markerMask   = uint64(0xffff) << 48
	cookieMask   = ^uint64(0xff)
	kindCopy     = 0
	kindCatch    = 1
	kindMiss     = 2
	// kindCont pauses the probe wherever it reenters a table after the
	// hop where OVS's trace could not follow it.
	kindCont = 3
	// kindTramp starts a trace at a given table (see extend).
	kindTramp = 4
	// kindBump is a flow that matches nothing but the helper's own mark:
	// adding it makes OVS start a revalidator round (see revalidated).
	kindBump = 5
)

// pkt_mark values the helper uses on the probe only, between a hop where
// the trace ends open (a dp_hash group, say) and the next table lookup.
// markTramp and markBump are bases: a session adds its tag (ownMark), so
// that helpers of concurrent traces on one node never install flows with
// the same match and priority, which OVS would take as one flow, the later
// replacing the earlier (a trace then continued through another trace's
// trampoline: without its tunnel fields an inter-node probe's trace ended
// in "drop" at the output table, while the real probe was delivered).
const (
	markCont  = uint32(0x74660000)
	markTramp = uint32(0x74661000)
	markBump  = uint32(0x74662000)
)

// ownMark is base with the trace's tag in its low bits (tags are at most
// 63, and unique among running traces).
func ownMark(base uint32, tag uint8) uint32 { return base | uint32(tag) }

// TraceCookie builds a trace's cookie base from its tag and a random value.
func TraceCookie(tag uint8, random uint32) uint64 {
	return cookieMarker | uint64(tag)<<40 | uint64(random)<<8
}

// userdata identifies a packet-in: magic, tag, kind, hop, candidate.
const udMagic = 0x5446 // "TF"

func userdata(tag uint8, kind uint8, hop, cand uint16) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint16(b, udMagic)
	b[2], b[3] = tag, kind
	binary.BigEndian.PutUint16(b[4:], hop)
	binary.BigEndian.PutUint16(b[6:], cand)
	return b
}

// ParseUserdata reads userdata written by this package.
func ParseUserdata(b []byte) (tag, kind uint8, hop, cand uint16, ok bool) {
	if len(b) != 8 || binary.BigEndian.Uint16(b) != udMagic {
		return 0, 0, 0, 0, false
	}
	return b[2], b[3], binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:]), true
}

// tagFields matches a trace's tag: its DSCP value and its ECN codepoint
// (dscp.Tag). Every flow that matches the tag matches both, so that the
// flows of traces sharing a DSCP value never take each other's probe.
func tagFields(tag uint8) []byte {
	return append(openflow.DSCPField(dscp.Value(tag)), openflow.ECNField(dscp.ECN(tag))...)
}

// setTagActions give a packet the tag: its DSCP value and ECN codepoint.
func setTagActions(tag uint8) []byte {
	return append(openflow.SetDSCPAction(dscp.Value(tag)), openflow.SetFieldAction(openflow.ECNField(dscp.ECN(tag)))...)
}
