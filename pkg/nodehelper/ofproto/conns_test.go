package ofproto

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ctlServer plays ovs-vswitchd's control socket: it answers each request
// with its method's name (an error for "fail"), echoing its id, and
// counts the connections it accepted; closeAll ends every connection.
type ctlServer struct {
	socket  string
	accepts atomic.Int32
	mu      sync.Mutex
	conns   []net.Conn
}

// ctlTest is a ctlServer and a context bounding the test's calls.
func ctlTest(t *testing.T) (*ctlServer, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return newCtlServer(t), ctx
}

func newCtlServer(t *testing.T) *ctlServer {
	t.Helper()
	s := &ctlServer{socket: filepath.Join(t.TempDir(), "ovs-vswitchd.1.ctl")}
	l, err := net.Listen("unix", s.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(); s.closeAll() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.accepts.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			go s.serve(c)
		}
	}()
	return s
}

func (s *ctlServer) serve(c net.Conn) {
	dec := json.NewDecoder(bufio.NewReader(c))
	for {
		var r request
		if err := dec.Decode(&r); err != nil {
			return
		}
		reply := map[string]any{"id": r.ID, "result": r.Method, "error": nil}
		if r.Method == "fail" {
			reply = map[string]any{"id": r.ID, "result": nil, "error": "no such command"}
		}
		if err := json.NewEncoder(c).Encode(reply); err != nil {
			return
		}
	}
}

func (s *ctlServer) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}

// Calls one after the other share one connection, a command's own error
// included; without Conns each call has its own.
func TestConnsOneConnectionForSequentialCalls(t *testing.T) {
	srv, ctx := ctlTest(t)
	p := &Conns{}
	defer p.Close()
	c := Client{Socket: srv.socket, Conns: p}
	for _, m := range []string{"version", "fail", "dpif/show", "revalidator/wait", "version"} {
		got, err := c.Call(ctx, m)
		if m == "fail" {
			if err == nil || !strings.Contains(err.Error(), "no such command") {
				t.Fatalf("fail: %q, %v", got, err)
			}
			continue
		}
		if err != nil || got != m {
			t.Fatalf("%s: %q, %v", m, got, err)
		}
	}
	if n := srv.accepts.Load(); n != 1 {
		t.Fatalf("%d connections for 5 calls, want 1", n)
	}
	plain := Client{Socket: srv.socket}
	for range 3 {
		if _, err := plain.Call(ctx, "version"); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.accepts.Load(); n != 4 {
		t.Fatalf("%d connections after 3 calls without Conns, want 4", n)
	}
}

// An idle connection that the other side closed meanwhile (ovs-vswitchd
// restarted its control server, say) is replaced: the call still answers.
func TestConnsIdleConnectionClosedByTheServer(t *testing.T) {
	srv, ctx := ctlTest(t)
	c := Client{Socket: srv.socket, Conns: &Conns{}}
	if _, err := c.Call(ctx, "version"); err != nil {
		t.Fatal(err)
	}
	srv.closeAll()
	got, err := c.Call(ctx, "version")
	if err != nil || got != "version" {
		t.Fatalf("call after the idle connection was closed: %q, %v", got, err)
	}
	if n := srv.accepts.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// Calls at once each get a connection; at most maxIdleCtl are kept.
func TestConnsConcurrentCalls(t *testing.T) {
	srv, ctx := ctlTest(t)
	p := &Conns{}
	c := Client{Socket: srv.socket, Conns: p}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := c.Call(ctx, "version"); err != nil || got != "version" {
				t.Errorf("%q, %v", got, err)
			}
		}()
	}
	wg.Wait()
	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	if idle > maxIdleCtl || idle < 1 {
		t.Fatalf("%d idle connections kept, want 1..%d", idle, maxIdleCtl)
	}
	p.Close()
	if _, err := c.Call(ctx, "version"); err != nil {
		t.Fatalf("a call after Close (a connection of its own): %v", err)
	}
}
