package openflow

import (
	"encoding/binary"
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
	s := &Session{conn: a, packetIns: make(chan PacketIn, 16), waiters: map[uint32]chan reply{},
		multipart: map[uint32][][]byte{}, closed: make(chan struct{}),
		logf: func(f string, args ...any) { mu.Lock(); logs = append(logs, f); mu.Unlock() }}
	return s, &logs
}

// A message libOpenflow cannot decode, or decodes by panicking, must not end
// the helper: the read loop logs and drops it.
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
	})
}
