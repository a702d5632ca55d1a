package openflow

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// NXT_PACKET_IN2 property types.
const (
	pinPacket       = 0
	pinFullLen      = 1
	pinTableID      = 3
	pinCookie       = 4
	pinReason       = 5
	pinMetadata     = 6
	pinUserdata     = 7
	pinContinuation = 8
)

// PacketIn is a decoded NXT_PACKET_IN2.
type PacketIn struct {
	TableID  uint8
	Cookie   uint64
	Reason   uint8
	FullLen  uint32
	Packet   []byte
	Userdata []byte
	Metadata Metadata
	// Paused is true when the packet-in carries a continuation, which the
	// helper must hand back with Resume for the packet to go on.
	Paused bool
	// Properties is the raw property list, which NXT_RESUME takes back.
	Properties []byte
}

// IsPacketIn2 reports whether msg is an NXT_PACKET_IN2.
func IsPacketIn2(msg []byte) bool {
	return len(msg) >= 16 && msg[1] == typeExperimenter &&
		binary.BigEndian.Uint32(msg[8:]) == nxVendorID && binary.BigEndian.Uint32(msg[12:]) == nxtPacketIn2
}

// DecodePacketIn2 decodes a whole NXT_PACKET_IN2 message.
func DecodePacketIn2(msg []byte) (PacketIn, error) {
	var p PacketIn
	if !IsPacketIn2(msg) {
		return p, fmt.Errorf("not an NXT_PACKET_IN2")
	}
	if int(binary.BigEndian.Uint16(msg[2:])) != len(msg) {
		return p, fmt.Errorf("packet-in2: header length %d, have %d bytes", binary.BigEndian.Uint16(msg[2:]), len(msg))
	}
	p.Properties = append([]byte(nil), msg[16:]...)
	b := msg[16:]
	for len(b) > 0 {
		if len(b) < 4 {
			return p, fmt.Errorf("packet-in2 property: %w", errShort)
		}
		t := binary.BigEndian.Uint16(b)
		l := int(binary.BigEndian.Uint16(b[2:]))
		if l < 4 || l > len(b) {
			return p, fmt.Errorf("packet-in2 property %d: bad length %d", t, l)
		}
		v := b[4:l]
		if pad8(l) <= len(b) {
			b = b[pad8(l):]
		} else {
			b = nil
		}
		switch t {
		case pinPacket:
			p.Packet = append([]byte(nil), v...)
		case pinFullLen:
			if len(v) >= 4 {
				p.FullLen = binary.BigEndian.Uint32(v)
			}
		case pinTableID:
			if len(v) >= 1 {
				p.TableID = v[0]
			}
		case pinCookie:
			// ofpprop_put_be64 pads 4 bytes before the value.
			if len(v) >= 12 {
				p.Cookie = binary.BigEndian.Uint64(v[4:])
			}
		case pinReason:
			if len(v) >= 1 {
				p.Reason = v[0]
			}
		case pinMetadata:
			md, err := DecodeMetadata(v)
			if err != nil {
				return p, fmt.Errorf("packet-in2 metadata: %w", err)
			}
			p.Metadata = md
		case pinUserdata:
			p.Userdata = append([]byte(nil), v...)
		case pinContinuation:
			p.Paused = true
		}
	}
	return p, nil
}

// Resume builds the NXT_RESUME that lets a paused packet go on: it takes
// back the packet-in's properties unchanged.
func Resume(xid uint32, pin PacketIn) []byte {
	b := make([]byte, 16, 16+len(pin.Properties))
	b[0] = Version
	b[1] = typeExperimenter
	binary.BigEndian.PutUint32(b[4:], xid)
	binary.BigEndian.PutUint32(b[8:], nxVendorID)
	binary.BigEndian.PutUint32(b[12:], nxtResume)
	b = append(b, pin.Properties...)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b))) //nolint:gosec // < 64 KiB
	return b
}

// TableName is a table id with the name the switch gives it.
type TableName struct {
	ID   uint8
	Name string
}

// DecodeTableFeatures decodes the body of one OFPMP_TABLE_FEATURES reply.
func DecodeTableFeatures(body []byte) ([]TableName, error) {
	var out []TableName
	for len(body) > 0 {
		if len(body) < 64 {
			return out, fmt.Errorf("table features: %w", errShort)
		}
		n := int(binary.BigEndian.Uint16(body))
		if n < 64 || n > len(body) {
			return out, fmt.Errorf("table features: bad length %d", n)
		}
		name := string(body[8:40])
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, TableName{ID: body[2], Name: name})
		body = body[n:]
	}
	return out, nil
}

// Error is an OFPT_ERROR with the request that caused it.
type Error struct {
	Type, Code uint16
	// Request is the start of the offending message, as the switch echoes it.
	Request []byte
}

func (e *Error) Error() string {
	req := ""
	if len(e.Request) >= 2 {
		req = fmt.Sprintf(" for message type %d", e.Request[1])
	}
	return fmt.Sprintf("openflow error type %d code %d%s (%s)", e.Type, e.Code, req, errorName(e.Type, e.Code))
}

func errorName(t, c uint16) string {
	switch {
	case t == 1 && c == 1:
		return "bad request: bad type"
	case t == 1:
		return "bad request"
	case t == 2:
		return "bad action"
	case t == 3:
		return "bad instruction"
	case t == 4:
		return "bad match"
	case t == 5 && c == 1:
		return "flow mod failed: table full"
	case t == 5 && c == 3:
		return "flow mod failed: overlap"
	case t == 5:
		return "flow mod failed"
	case t == 0xffff:
		return "experimenter error"
	}
	return "see OpenFlow 1.5 ofp_error_type"
}

// DecodeError decodes a whole OFPT_ERROR message.
func DecodeError(msg []byte) (*Error, error) {
	if len(msg) < 12 || msg[1] != typeError {
		return nil, fmt.Errorf("not an OFPT_ERROR")
	}
	return &Error{
		Type:    binary.BigEndian.Uint16(msg[8:]),
		Code:    binary.BigEndian.Uint16(msg[10:]),
		Request: append([]byte(nil), msg[12:]...),
	}, nil
}

// Reasons of an OFPT_FLOW_REMOVED (OpenFlow 1.5).
const (
	RemovedIdleTimeout = 0
	RemovedHardTimeout = 1
	RemovedDelete      = 2 // a DELETE flow mod, from any connection
	RemovedGroupDelete = 3
	RemovedMeterDelete = 4
	RemovedEviction    = 5
)

// FlowRemoved is an OFPT_FLOW_REMOVED: which flow went, and why.
type FlowRemoved struct {
	Cookie   uint64
	Priority uint16
	Reason   uint8
	TableID  uint8
}

// DecodeFlowRemoved reads the fixed part of an OpenFlow 1.5
// OFPT_FLOW_REMOVED (the match and statistics that follow are not needed).
// OpenFlow 1.5 reordered it: table_id, reason, priority, idle_timeout,
// hard_timeout, then the cookie.
func DecodeFlowRemoved(msg []byte) (FlowRemoved, error) {
	if len(msg) < 24 || msg[0] != Version || msg[1] != typeFlowRemoved {
		return FlowRemoved{}, fmt.Errorf("not an OpenFlow 1.5 flow-removed message (%d bytes)", len(msg))
	}
	return FlowRemoved{
		TableID:  msg[8],
		Reason:   msg[9],
		Priority: binary.BigEndian.Uint16(msg[10:]),
		Cookie:   binary.BigEndian.Uint64(msg[16:]),
	}, nil
}
