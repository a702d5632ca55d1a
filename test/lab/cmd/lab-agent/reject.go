package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/test/lab/agent"
)

// rejecter is the agent's OpenFlow connection for the reject rule: it
// receives the packet-ins that the reject flows send to controller id
// agent.RejectControllerID and answers each with a packet-out of a TCP RST or
// an ICMP unreachable (agent.RejectReply). It speaks just enough OpenFlow
// 1.5 by hand: a client this small needs no library, and every message it
// sends is spelled out below.
type rejecter struct {
	bridge string
	cfg    agent.Config
	mu     sync.Mutex
	state  agent.State // the last synced state, for the way back to a source
}

func (r *rejecter) setState(s agent.State) {
	r.mu.Lock()
	r.state = s
	r.mu.Unlock()
}

// run keeps a connection to the bridge's management socket until ctx ends.
func (r *rejecter) run(ctx context.Context, rundir string) {
	sock := filepath.Join(rundir, r.bridge+".mgmt")
	for ctx.Err() == nil {
		err := r.session(ctx, sock)
		if ctx.Err() == nil {
			log.Printf("reject: OpenFlow session on %s: %v; reconnecting", sock, err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

const (
	ofVersion15          = 6
	ofptHello            = 0
	ofptEchoRequest      = 2
	ofptEchoReply        = 3
	ofptExperimenter     = 4
	ofptSetConfig        = 9
	ofptPacketOut        = 13
	nxVendor             = 0x00002320
	nxtSetPacketInFormat = 16
	nxtSetControllerID   = 20
	nxtPacketIn2         = 30
	nxpifNXTPacketIn2    = 2
	nxpintPacket         = 0
	nxpintUserdata       = 7
	ofppController       = 0xfffffffd
)

func ofMsg(typ uint8, xid uint32, body []byte) []byte {
	m := make([]byte, 8, 8+len(body))
	m[0], m[1] = ofVersion15, typ
	binary.BigEndian.PutUint16(m[2:], uint16(8+len(body))) //nolint:gosec // OpenFlow messages are < 64 KiB
	binary.BigEndian.PutUint32(m[4:], xid)
	return append(m, body...)
}

func nxMsg(subtype uint32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, nxVendor)
	b = binary.BigEndian.AppendUint32(b, subtype)
	return ofMsg(ofptExperimenter, 0, append(b, body...))
}

func (r *rejecter) session(ctx context.Context, sock string) error {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	setup := [][]byte{
		ofMsg(ofptHello, 0, nil),
		// Packet-ins from controller(id=N) reach only connections with id N.
		nxMsg(nxtSetControllerID, []byte{0, 0, 0, 0, 0, 0, byte(agent.RejectControllerID >> 8), byte(agent.RejectControllerID & 0xff)}),
		// Only NXT_PACKET_IN2 carries the userdata that says "reject".
		nxMsg(nxtSetPacketInFormat, binary.BigEndian.AppendUint32(nil, nxpifNXTPacketIn2)),
		// A management connection gets no packet-ins until miss_send_len > 0.
		ofMsg(ofptSetConfig, 0, []byte{0, 0, 0xff, 0xff}),
	}
	for _, m := range setup {
		if _, err := c.Write(m); err != nil {
			return err
		}
	}
	log.Printf("reject: listening on %s as controller id %d", sock, agent.RejectControllerID)
	hdr := make([]byte, 8)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint16(hdr[2:]))
		if n < 8 {
			return fmt.Errorf("bad OpenFlow length %d", n)
		}
		body := make([]byte, n-8)
		if _, err := io.ReadFull(c, body); err != nil {
			return err
		}
		switch hdr[1] {
		case ofptEchoRequest:
			if _, err := c.Write(ofMsg(ofptEchoReply, binary.BigEndian.Uint32(hdr[4:]), body)); err != nil {
				return err
			}
		case ofptExperimenter:
			if len(body) < 8 || binary.BigEndian.Uint32(body) != nxVendor || binary.BigEndian.Uint32(body[4:]) != nxtPacketIn2 {
				continue
			}
			if err := r.packetIn(c, body[8:]); err != nil {
				log.Printf("reject: %v", err)
			}
		}
	}
}

// packetIn handles one NXT_PACKET_IN2 (its properties after the experimenter
// header): a reject's packet is answered, anything else ignored.
func (r *rejecter) packetIn(c io.Writer, props []byte) error {
	var pkt, userdata []byte
	for len(props) >= 4 {
		typ, l := binary.BigEndian.Uint16(props), int(binary.BigEndian.Uint16(props[2:]))
		if l < 4 || l > len(props) {
			return errors.New("malformed packet-in property")
		}
		switch typ {
		case nxpintPacket:
			pkt = props[4:l]
		case nxpintUserdata:
			userdata = props[4:l]
		}
		props = props[min((l+7)/8*8, len(props)):]
	}
	if !agent.IsReject(userdata) {
		return nil
	}
	r.mu.Lock()
	st := r.state
	r.mu.Unlock()
	reply, out, err := agent.RejectReply(r.cfg, st, pkt)
	if errors.Is(err, agent.ErrNoReject) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = c.Write(packetOut(reply, out))
	return err
}

// packetOut is an OFPT_PACKET_OUT (1.5: the in_port is a match) from the
// controller, setting tun_dst when the answer goes into the tunnel.
func packetOut(frame []byte, out agent.Injection) []byte {
	// Match: OXM in_port=CONTROLLER, padded to 8 bytes.
	match := []byte{0, 1, 0, 12, 0x80, 0, 0, 4}
	match = binary.BigEndian.AppendUint32(match, ofppController)
	match = append(match, 0, 0, 0, 0)
	var acts []byte
	if out.TunDst.IsValid() {
		// set_field NXM_NX_TUN_IPV4_DST (class 1, field 32), padded to 16.
		acts = append(acts, 0, 25, 0, 16, 0, 1, 32<<1, 4)
		ip := out.TunDst.As4()
		acts = append(append(acts, ip[:]...), 0, 0, 0, 0)
	}
	acts = append(acts, 0, 0, 0, 16)
	acts = binary.BigEndian.AppendUint32(acts, uint32(out.OFPort)) //nolint:gosec // an OpenFlow port number
	acts = append(acts, 0xff, 0xff, 0, 0, 0, 0, 0, 0)
	body := binary.BigEndian.AppendUint32(nil, 0xffffffff)        // no buffer
	body = binary.BigEndian.AppendUint16(body, uint16(len(acts))) //nolint:gosec // a few actions
	body = append(body, 0, 0)
	body = append(append(append(body, match...), acts...), frame...)
	return ofMsg(ofptPacketOut, 0, body)
}
