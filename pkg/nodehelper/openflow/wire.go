// Package openflow speaks the small part of OpenFlow 1.5 (with Nicira
// extensions) that the node helper needs: a session on a bridge's management
// socket, copies of existing flows with a tag match and a controller action in
// front, flow deletion by cookie, packet-out, and decoding of NXT_PACKET_IN2,
// flow descriptions, table features and errors.
//
// Standard messages are built with antrea.io/libOpenflow. Copies of flows are
// built from the raw bytes of the flow's description instead: the helper does
// not understand the pipeline it traces, and raw match and instruction bytes
// survive every field and action OVS knows, including those libOpenflow does
// not decode.
package openflow

import (
	"encoding/binary"
	"errors"

	"antrea.io/libOpenflow/common"
	of15 "antrea.io/libOpenflow/openflow15"
)

// Version is the OpenFlow version the helper speaks.
const Version = 6 // OpenFlow 1.5

// OpenFlow 1.5 message types used here.
const (
	typeHello        = 0
	typeError        = 1
	typeEchoRequest  = 2
	typeEchoReply    = 3
	typeExperimenter = 4
	typeFlowRemoved  = 11
	typeFlowMod      = 14
	typeMultipartReq = 18
	typeMultipartRep = 19
	typeBarrierReply = 21
	typeSetAsync     = 28
)

// Nicira extension constants (OVS include/openflow/nicira-ext.h).
const (
	nxVendorID    = 0x00002320
	nxtResume     = 28
	nxtPacketIn2  = 30
	nxpifPacketIn = 2 // NXPIF_NXT_PACKET_IN2

	multipartFlowDesc      = 1
	multipartTableStats    = 3
	multipartTableFeatures = 12
	multipartReplyMore     = 1

	instApplyActions = 4

	// AllTables is OFPTT_ALL.
	AllTables = 0xff
	// PortTable is OFPP_TABLE: a packet-out to it starts the pipeline at table 0.
	PortTable = 0xfffffff9
)

var errShort = errors.New("message too short")

func marshal(m interface{ MarshalBinary() ([]byte, error) }, xid uint32) ([]byte, error) {
	b, err := m.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if len(b) < 8 {
		return nil, errShort
	}
	binary.BigEndian.PutUint32(b[4:], xid)
	return b, nil
}

// Hello is the OpenFlow 1.5 HELLO with a version bitmap.
func Hello(xid uint32) ([]byte, error) {
	h, err := common.NewHello(Version)
	if err != nil {
		return nil, err
	}
	return marshal(h, xid)
}

// EchoReply answers an echo request with the same xid and body.
func EchoReply(req []byte) []byte {
	out := append([]byte(nil), req...)
	out[1] = typeEchoReply
	return out
}

// SetConfig sets miss_send_len: without a nonzero value OVS sends no
// packet-ins to a connection on BRIDGE.mgmt.
func SetConfig(xid uint32) ([]byte, error) {
	m := of15.NewSetConfig()
	m.MissSendLen = 0xffff
	return marshal(m, xid)
}

// SetPacketInFormat asks for NXT_PACKET_IN2, the only format that carries
// userdata and continuations.
func SetPacketInFormat(xid uint32) ([]byte, error) {
	return marshal(of15.NewSetPacketInFormat(nxpifPacketIn), xid)
}

// SetControllerID gives this connection its controller id, so that it
// receives only packet-ins from controller(id=ID) actions.
func SetControllerID(xid uint32, id uint16) ([]byte, error) {
	return marshal(of15.NewSetControllerID(id), xid)
}

// Barrier is an OFPT_BARRIER_REQUEST.
func Barrier(xid uint32) ([]byte, error) {
	return marshal(of15.NewBarrierRequest(), xid)
}

// DeleteByCookie deletes, in every table, the flows whose cookie equals
// cookie under mask.
func DeleteByCookie(xid uint32, cookie, mask uint64) ([]byte, error) {
	fm := of15.NewFlowMod()
	fm.Command = of15.FC_DELETE
	fm.TableId = AllTables
	fm.Cookie = cookie
	fm.CookieMask = mask
	return marshal(fm, xid)
}

// PacketOut injects data as if it arrived on inPort and runs it through the
// pipeline from table 0.
func PacketOut(xid uint32, inPort uint32, data []byte) ([]byte, error) {
	return PacketOutMarked(xid, inPort, 0, data)
}

// PacketOutMarked is PacketOut of a packet that carries pkt_mark mark (0:
// none), as the kernel's skb mark of a packet the host sent.
func PacketOutMarked(xid uint32, inPort, mark uint32, data []byte) ([]byte, error) {
	po := of15.NewPacketOut()
	po.Match.AddField(*of15.NewInPortField(inPort))
	if mark != 0 {
		f, err := of15.FindFieldHeaderByName("NXM_NX_PKT_MARK", false)
		if err != nil {
			return nil, err
		}
		f.Value = &of15.Uint32Message{Data: mark}
		po.AddAction(of15.NewActionSetField(*f))
	}
	po.AddAction(of15.NewActionOutput(PortTable))
	po.Data = rawMessage(data)
	return marshal(po, xid)
}

// rawMessage carries packet bytes as libOpenflow's util.Message.
type rawMessage []byte

func (r rawMessage) Len() uint16 { return uint16(len(r)) } //nolint:gosec // packets are < 64 KiB

func (r rawMessage) MarshalBinary() ([]byte, error) { return append([]byte(nil), r...), nil }

func (r rawMessage) UnmarshalBinary([]byte) error { return errors.New("rawMessage is write-only") }
