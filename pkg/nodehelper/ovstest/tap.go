package ovstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// Tap is a unix socket in front of an ovsdb-server that keeps both
// directions of every connection, so that a test sees byte for byte what
// the server said to a client under test (the fuzz targets' seeds are
// recorded through one).
type Tap struct {
	// Path is the socket to give the client: "unix:" + Path.
	Path     string
	mu       sync.Mutex
	up, down bytes.Buffer
	wg       sync.WaitGroup
	listener net.Listener
}

// NewTap listens on a socket in t's temporary directory and relays every
// connection to the server's socket.
func NewTap(t testing.TB, server string) *Tap {
	t.Helper()
	tp := &Tap{Path: filepath.Join(t.TempDir(), "tap.sock")}
	l, err := net.Listen("unix", tp.Path)
	if err != nil {
		t.Fatal(err)
	}
	tp.listener = l
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", server)
			if err != nil {
				_ = c.Close()
				continue
			}
			tp.wg.Add(2)
			go tp.copy(s, c, &tp.up)
			go tp.copy(c, s, &tp.down)
		}
	}()
	return tp
}

func (tp *Tap) copy(dst, src net.Conn, keep *bytes.Buffer) {
	defer tp.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			tp.mu.Lock()
			keep.Write(buf[:n])
			tp.mu.Unlock()
			_, _ = dst.Write(buf[:n])
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// Close stops accepting connections; those open end when their client
// closes them.
func (tp *Tap) Close() { _ = tp.listener.Close() }

// ResultOf waits for the connections to end and returns the server's
// result to the client's request with method for database db, as sent.
func (tp *Tap) ResultOf(t testing.TB, method, db string) json.RawMessage {
	t.Helper()
	tp.wg.Wait()
	methods, params, results := map[string]string{}, map[string][]json.RawMessage{}, map[string]json.RawMessage{}
	type msg struct {
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
		Result json.RawMessage   `json:"result"`
		ID     json.RawMessage   `json:"id"`
	}
	for _, side := range []*bytes.Buffer{&tp.up, &tp.down} {
		d := json.NewDecoder(bytes.NewReader(side.Bytes()))
		for {
			var m msg
			if err := d.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			id := string(m.ID)
			if side == &tp.up && m.Method != "" {
				methods[id], params[id] = m.Method, m.Params
			} else if m.Method == "" {
				results[id] = m.Result
			}
		}
	}
	for id, m := range methods {
		if m == method && len(params[id]) > 0 && string(params[id][0]) == strconv.Quote(db) {
			return results[id]
		}
	}
	t.Fatalf("no %s for %s in what the client sent", method, db)
	return nil
}
