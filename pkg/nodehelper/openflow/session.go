package openflow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Session is one OpenFlow 1.5 connection to a bridge's management socket,
// set up to receive NXT_PACKET_IN2 for its own controller id only.
type Session struct {
	conn      net.Conn
	xid       atomic.Uint32
	writeMu   sync.Mutex
	packetIns *queue[PacketIn]
	// flowRemoved carries OFPT_FLOW_REMOVED messages (for flows added
	// with FlagSendFlowRem); its channel is never closed: watch Done.
	flowRemoved *queue[FlowRemoved]
	// quit ends the queues' pumps (Close).
	quit     chan struct{}
	quitOnce sync.Once
	// frDropped is set once a flow-removed message found the queue full
	// (every connection gets every trace's, and a sender stops reading).
	frDropped bool

	mu        sync.Mutex
	waiters   map[uint32]chan reply
	multipart map[uint32][][]byte
	// errs holds OFPT_ERRORs that arrived since the last barrier.
	errs    []error
	closed  chan struct{}
	readErr error
	// logf reports what the read loop cannot return to a caller (Logf).
	logf atomic.Pointer[func(format string, args ...any)]
}

type reply struct {
	bodies [][]byte
	err    error
}

// Dial connects to a bridge's management socket (RUNDIR/BRIDGE.mgmt),
// negotiates OpenFlow 1.5, sets miss_send_len, the NXT_PACKET_IN2 format and
// the controller id, and waits for a barrier so that the session is ready.
func Dial(ctx context.Context, socket string, controllerID uint16, logf func(string, ...any)) (*Session, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("connect to OpenFlow socket %s: %w", socket, err)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &Session{
		conn:        conn,
		packetIns:   newQueue[PacketIn](queueLimit),
		flowRemoved: newQueue[FlowRemoved](queueLimit),
		quit:        make(chan struct{}),
		waiters:     map[uint32]chan reply{},
		multipart:   map[uint32][][]byte{},
		closed:      make(chan struct{}),
	}
	s.logf.Store(&logf)
	if err := s.handshake(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	go s.packetIns.pump(s.quit, true)
	go s.flowRemoved.pump(s.quit, false)
	go s.readLoop()
	for _, build := range []func(uint32) ([]byte, error){
		SetConfig,
		SetPacketInFormat,
		func(x uint32) ([]byte, error) { return SetControllerID(x, controllerID) },
	} {
		msg, err := build(s.nextXid())
		if err == nil {
			err = s.Send(msg)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("configure OpenFlow session: %w", err)
		}
	}
	if err := s.Barrier(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("configure OpenFlow session: %w", err)
	}
	return s, nil
}

func (s *Session) handshake(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = s.conn.SetDeadline(dl)
	} else {
		_ = s.conn.SetDeadline(time.Now().Add(5 * time.Second))
	}
	defer func() { _ = s.conn.SetDeadline(time.Time{}) }()
	hello, err := Hello(s.nextXid())
	if err != nil {
		return err
	}
	if _, err := s.conn.Write(hello); err != nil {
		return fmt.Errorf("send OpenFlow hello: %w", err)
	}
	msg, err := readMessage(s.conn)
	if err != nil {
		return fmt.Errorf("read OpenFlow hello: %w", err)
	}
	if msg[1] == typeError {
		e, _ := DecodeError(msg)
		return fmt.Errorf("switch refused the OpenFlow hello (enable OpenFlow15 in the bridge's protocols): %w", e)
	}
	if msg[1] != typeHello {
		return fmt.Errorf("expected OpenFlow hello, got message type %d", msg[1])
	}
	if msg[0] < Version {
		return fmt.Errorf("switch speaks OpenFlow version %#x, need 1.5: add OpenFlow15 to the bridge's protocols", msg[0])
	}
	return nil
}

func readMessage(r io.Reader) ([]byte, error) {
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[2:]))
	if n < 8 {
		return nil, fmt.Errorf("openflow message length %d < 8", n)
	}
	msg := make([]byte, n)
	copy(msg, hdr)
	if _, err := io.ReadFull(r, msg[8:]); err != nil {
		return nil, err
	}
	return msg, nil
}

func (s *Session) nextXid() uint32 { return s.xid.Add(1) }

// NextXid returns a fresh transaction id for a message built by the caller.
func (s *Session) NextXid() uint32 { return s.nextXid() }

// log reports what the read loop cannot return to a caller.
func (s *Session) log(format string, args ...any) { (*s.logf.Load())(format, args...) }

// Reuse makes a session that served a trace serve another: controllerID
// becomes its controller id, logf its log. It returns once OVS has
// applied the id, so that packet-ins for the id before reach it no more;
// those it holds already are dropped, but one the queue was handing over
// at that moment may still reach the reader (a trace's own checks, tag
// and mark, reject it). The caller vouches that the trace before left
// nothing pending: its flows deleted, its last barrier answered.
func (s *Session) Reuse(ctx context.Context, controllerID uint16, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s.logf.Store(&logf)
	msg, err := SetControllerID(s.nextXid(), controllerID)
	if err != nil {
		return err
	}
	if err := s.Send(msg); err != nil {
		return err
	}
	if err := s.Barrier(ctx); err != nil {
		return err
	}
	s.packetIns.clear()
	s.flowRemoved.clear()
	return nil
}

// queueLimit is how many packet-ins (and flow-removed messages) a session
// holds that its reader has not taken; the read loop drops what comes
// beyond it.
const queueLimit = 4096

// PacketIns delivers the decoded NXT_PACKET_IN2 messages for this session's
// controller id. It is closed when the connection ends and its reader has
// taken every one, or at Close (those not taken then are dropped).
func (s *Session) PacketIns() <-chan PacketIn { return s.packetIns.out }

// FlowRemoved delivers the OFPT_FLOW_REMOVED messages OVS sends this
// connection: for flows added with FlagSendFlowRem, whoever removed them
// (OVS sends one to every connection, with the reason). The channel is
// never closed: watch PacketIns or Done for the end of the connection.
func (s *Session) FlowRemoved() <-chan FlowRemoved { return s.flowRemoved.out }

// Done is closed when the connection has ended.
func (s *Session) Done() <-chan struct{} { return s.closed }

// Send writes one message.
func (s *Session) Send(msg []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	select {
	case <-s.closed:
		return fmt.Errorf("openflow session closed: %w", s.readErr)
	default:
	}
	_, err := s.conn.Write(msg)
	return err
}

// Barrier sends a barrier and waits for its reply; it returns the
// OFPT_ERRORs that the switch sent for earlier messages.
func (s *Session) Barrier(ctx context.Context) error {
	msg, err := Barrier(s.nextXid())
	if err != nil {
		return err
	}
	r, err := s.request(ctx, msg)
	if err != nil {
		return err
	}
	return r.err
}

// Multipart sends a multipart request and returns the bodies of all reply
// parts (after the 16-byte multipart header).
func (s *Session) Multipart(ctx context.Context, msg []byte) ([][]byte, error) {
	r, err := s.request(ctx, msg)
	if err != nil {
		return nil, err
	}
	return r.bodies, r.err
}

func (s *Session) request(ctx context.Context, msg []byte) (reply, error) {
	xid := binary.BigEndian.Uint32(msg[4:])
	ch := make(chan reply, 1)
	s.mu.Lock()
	s.waiters[xid] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, xid)
		s.mu.Unlock()
	}()
	if err := s.Send(msg); err != nil {
		return reply{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-s.closed:
		return reply{}, fmt.Errorf("openflow session closed: %w", s.readErr)
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

// Close ends the session.
func (s *Session) Close() {
	s.quitOnce.Do(func() { close(s.quit) })
	_ = s.conn.Close()
	<-s.closed
}

func (s *Session) readLoop() {
	defer s.flowRemoved.end()
	defer s.packetIns.end()
	for {
		msg, err := readMessage(s.conn)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
				err = nil
			}
			s.readErr = err
			close(s.closed)
			return
		}
		s.handle(msg)
	}
}

// handle dispatches one message. It has no recover(): the decoders return
// errors for every input, so a panic here is a bug that must crash (the
// fuzz targets and tests find it). A malformed message is reported with
// its bytes, so that it can be replayed, and dropped: one odd message must
// not end the trace.
func (s *Session) handle(msg []byte) {
	if len(msg) < 8 || int(binary.BigEndian.Uint16(msg[2:])) != len(msg) {
		s.log("openflow: dropped a malformed message (%d bytes, header length not matching): %x", len(msg), msg)
		return
	}
	xid := binary.BigEndian.Uint32(msg[4:])
	switch {
	case msg[1] == typeEchoRequest:
		if err := s.Send(EchoReply(msg)); err != nil {
			s.log("openflow: echo reply: %v", err)
		}
	case IsPacketIn2(msg):
		pin, err := DecodePacketIn2(msg)
		if err != nil {
			s.log("openflow: dropped a bad packet-in: %v: %x", err, msg)
			return
		}
		if !s.packetIns.push(pin) {
			s.log("openflow: packet-in queue full, dropped one")
		}
	case msg[1] == typeFlowRemoved:
		fr, err := DecodeFlowRemoved(msg)
		if err != nil {
			s.log("openflow: dropped a bad flow-removed: %v: %x", err, msg)
			return
		}
		if !s.flowRemoved.push(fr) && !s.frDropped {
			s.frDropped = true
			s.log("openflow: flow-removed queue full, dropping messages")
		}
	case msg[1] == typeError:
		e, err := DecodeError(msg)
		if err != nil {
			s.log("openflow: dropped a bad error message: %v: %x", err, msg)
			return
		}
		s.mu.Lock()
		if ch, ok := s.waiters[xid]; ok {
			ch <- reply{err: e}
			delete(s.waiters, xid)
		} else {
			s.errs = append(s.errs, fmt.Errorf("request xid %d: %w", xid, e))
		}
		s.mu.Unlock()
	case msg[1] == typeBarrierReply:
		s.mu.Lock()
		errs := errors.Join(s.errs...)
		s.errs = nil
		if ch, ok := s.waiters[xid]; ok {
			ch <- reply{err: errs}
			delete(s.waiters, xid)
		}
		s.mu.Unlock()
	case msg[1] == typeMultipartRep && len(msg) >= 16:
		more := binary.BigEndian.Uint16(msg[10:])&multipartReplyMore != 0
		s.mu.Lock()
		s.multipart[xid] = append(s.multipart[xid], msg[16:])
		if !more {
			if ch, ok := s.waiters[xid]; ok {
				ch <- reply{bodies: s.multipart[xid]}
				delete(s.waiters, xid)
			}
			delete(s.multipart, xid)
		}
		s.mu.Unlock()
	default:
		// Port status and other asynchronous messages do not concern a
		// trace. They are not handed to libOpenflow's Parse either: on
		// malformed input some of its decoders (Hello, MultipartRequest)
		// loop forever or panic.
		s.log("openflow: ignored message type %d", msg[1])
	}
}
