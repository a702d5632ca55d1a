package ofproto

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeVswitchd answers unixctl requests on a unix socket as ovs-vswitchd
// does (one request, one reply, then it hangs up), with the replies it is
// handed for the next calls, in order, and notes the methods asked for.
type fakeVswitchd struct {
	socket  string
	mu      sync.Mutex
	replies [][]byte
	asked   []string
}

func newFakeVswitchd(f *testing.F) *fakeVswitchd {
	v := &fakeVswitchd{socket: filepath.Join(f.TempDir(), "ovs-vswitchd.1.ctl")}
	l, err := net.Listen("unix", v.socket)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			var req request
			if json.NewDecoder(conn).Decode(&req) != nil || req.Params == nil {
				req.Method = "(not a unixctl request)"
			}
			v.mu.Lock()
			v.asked = append(v.asked, req.Method)
			var reply []byte
			if len(v.replies) > 0 {
				reply, v.replies = v.replies[0], v.replies[1:]
			}
			v.mu.Unlock()
			// The method is noted before the reply goes out, so it is
			// there when the client's call returns.
			_, _ = conn.Write(reply)
			_ = conn.Close()
		}
	}()
	return v
}

// answer sets the replies to the next calls and forgets what was asked.
func (v *fakeVswitchd) answer(replies ...[]byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.replies, v.asked = replies, nil
}

func (v *fakeVswitchd) methods() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.asked
}

// parseReply is what a unixctl reply says, read independently of Call:
// the first JSON value, its result if that is a string and its error is
// null or absent.
func parseReply(b []byte) (result string, ok bool) {
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		// OVS answers with the request's id, a number.
		ID int `json:"id"`
	}
	if json.NewDecoder(bytes.NewReader(b)).Decode(&r) != nil {
		return "", false
	}
	if len(r.Error) != 0 && string(r.Error) != "null" {
		return "", false
	}
	return result, json.Unmarshal(r.Result, &result) == nil && string(r.Result) != "null"
}

// FuzzUnixctlReply feeds ovs-vswitchd's JSON-RPC replies to what the helper
// asks over the control socket (Client.Trace: ofproto/trace, then
// dpif/show). The seeds in testdata/fuzz/FuzzUnixctlReply are replies of a
// real ovs-vswitchd (testdata/fuzz/README.md). A reply whose result is a
// string must come back as that text, parsed as Parse and ParseDpifShow
// parse it; any other reply must be an error naming the command.
func FuzzUnixctlReply(f *testing.F) {
	v := newFakeVswitchd(f)
	f.Fuzz(func(t *testing.T, trace, dpif []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		v.answer(trace, dpif)
		got, err := Client{Socket: v.socket}.Trace(ctx, "br-int", "in_port=1,tcp", []byte{0xde, 0xad})
		text, ok := parseReply(trace)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ofproto/trace: ") {
				t.Fatalf("reply %q: the error does not name ofproto/trace: %v", trace, err)
			}
			if ok {
				t.Fatalf("reply %q holds the trace %q, but Trace failed: %v", trace, text, err)
			}
			// Trace asks for the datapath's ports only after a trace
			// it could read.
			if m := v.methods(); !reflect.DeepEqual(m, []string{"ofproto/trace"}) {
				t.Fatalf("asked %v after a failed trace", m)
			}
			return
		}
		if !ok {
			t.Fatalf("reply %q holds no trace, but Trace returned %+v", trace, got)
		}
		if m := v.methods(); !reflect.DeepEqual(m, []string{"ofproto/trace", "dpif/show"}) {
			t.Fatalf("asked %v, want ofproto/trace then dpif/show", m)
		}
		want := Parse(text, "br-int")
		if ports, ok := parseReply(dpif); ok {
			want.Ports = ParseDpifShow(ports)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Trace = %+v, want %+v", got, want)
		}
		// The text survives a round trip through a reply of our own.
		again, _ := json.Marshal(response{Result: &text})
		if r, ok := parseReply(again); !ok || r != text {
			t.Fatalf("re-encoded reply %s reads back as %q", again, r)
		}
	})
}
