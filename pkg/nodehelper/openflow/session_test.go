package openflow

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

func testSession(t *testing.T) (*Session, *[]string) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	go func() { _, _ = io.Copy(io.Discard, b) }()
	var mu sync.Mutex
	var logs []string
	s := &Session{conn: a, packetIns: newQueue[PacketIn](16), flowRemoved: newQueue[FlowRemoved](16), quit: make(chan struct{}), waiters: map[uint32]chan reply{},
		multipart: map[uint32][][]byte{}, closed: make(chan struct{})}
	logf := func(f string, args ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, args...)); mu.Unlock() }
	s.logf.Store(&logf)
	return s, &logs
}

// A message the decoders cannot make sense of must not end the helper: the
// read loop logs and drops it. handle has no recover(), so a decoder that
// panics fails this test.
func TestHandleSurvivesGarbage(t *testing.T) {
	s, _ := testSession(t)
	for typ := 0; typ < 40; typ++ {
		for n := 8; n < 40; n += 3 {
			msg := make([]byte, n)
			msg[0], msg[1] = Version, byte(typ)
			binary.BigEndian.PutUint16(msg[2:], uint16(n))
			for i := 8; i < n; i++ {
				msg[i] = byte(i * typ)
			}
			s.handle(msg) // must not panic
		}
	}
}

func TestErrorsReachTheirRequest(t *testing.T) {
	s, _ := testSession(t)
	ch := make(chan reply, 1)
	s.waiters[7] = ch
	errMsg := []byte{Version, typeError, 0, 20, 0, 0, 0, 7, 0, 5, 0, 1, Version, typeFlowMod, 0, 8, 0, 0, 0, 7}
	s.handle(errMsg)
	r := <-ch
	if r.err == nil || !strings.Contains(r.err.Error(), "type 5 code 1") || !strings.Contains(r.err.Error(), "message type 14") {
		t.Fatalf("error for the request: %v", r.err)
	}
	// An error for a request nobody waits on comes back with the next barrier.
	errMsg[7] = 8
	s.handle(errMsg)
	bch := make(chan reply, 1)
	s.waiters[9] = bch
	s.handle([]byte{Version, typeBarrierReply, 0, 8, 0, 0, 0, 9})
	if r := <-bch; r.err == nil || !strings.Contains(r.err.Error(), "xid 8") {
		t.Fatalf("barrier did not return the earlier error: %v", r.err)
	}
}

func TestMultipartParts(t *testing.T) {
	s, _ := testSession(t)
	ch := make(chan reply, 1)
	s.waiters[3] = ch
	part := func(more bool, body byte) []byte {
		m := []byte{Version, typeMultipartRep, 0, 17, 0, 0, 0, 3, 0, 12, 0, 0, 0, 0, 0, 0, body}
		if more {
			m[11] = multipartReplyMore
		}
		return m
	}
	s.handle(part(true, 1))
	s.handle(part(false, 2))
	r := <-ch
	if len(r.bodies) != 2 || r.bodies[0][0] != 1 || r.bodies[1][0] != 2 {
		t.Fatalf("bodies %v", r.bodies)
	}
}

// A malformed message becomes one log line that carries its bytes in hex
// (so that it can be replayed against the decoders), and the session goes
// on: the next message is handled as usual.
func TestHandleLogsMalformedMessagesWithTheirBytes(t *testing.T) {
	badPin := samplePacketIn2(true)
	badPin[16+3] = 2 // the first property claims 2 bytes, less than its own header
	for _, tc := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"packet-in2 with a bad property length", badPin, "bad packet-in"},
		{"header length beyond the message", []byte{Version, typeError, 0, 40, 0, 0, 0, 1, 0, 1, 0, 1}, "malformed message"},
		{"header length short of the message", []byte{Version, typeBarrierReply, 0, 8, 0, 0, 0, 1, 9}, "malformed message"},
		{"shorter than a header", []byte{Version, typeError, 0}, "malformed message"},
		{"flow-removed without its fixed part", []byte{Version, typeFlowRemoved, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0}, "bad flow-removed"},
		{"error without type and code", []byte{Version, typeError, 0, 10, 0, 0, 0, 1, 0, 1}, "bad error message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := testSession(t)
			s.handle(tc.msg)
			if len(*logs) != 1 || !strings.Contains((*logs)[0], tc.want) || !strings.Contains((*logs)[0], hex.EncodeToString(tc.msg)) {
				t.Fatalf("logs %q: want one line saying %q with the message's bytes %x", *logs, tc.want, tc.msg)
			}
			// The session goes on: a barrier reply after it still reaches its waiter.
			ch := make(chan reply, 1)
			s.waiters[9] = ch
			s.handle([]byte{Version, typeBarrierReply, 0, 8, 0, 0, 0, 9})
			select {
			case r := <-ch:
				if r.err != nil {
					t.Errorf("barrier after the malformed message: %v", r.err)
				}
			default:
				t.Fatal("the barrier reply after the malformed message reached nobody")
			}
		})
	}
}

func FuzzSessionHandle(f *testing.F) {
	f.Add(samplePacketIn2(true))
	f.Add([]byte{Version, typeError, 0, 12, 0, 0, 0, 1, 0, 1, 0, 1})
	f.Add([]byte{Version, typeEchoRequest, 0, 8, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 8 {
			return
		}
		s, _ := testSession(t)
		s.handle(b)
		// Once more with the header's length made right, so that the
		// decoders behind it see the bytes too (the read loop only hands
		// on messages whose length matches their header).
		if len(b) <= 0xffff {
			b = append([]byte(nil), b...)
			binary.BigEndian.PutUint16(b[2:], uint16(len(b))) //nolint:gosec // checked above
			s.handle(b)
		}
	})
}
