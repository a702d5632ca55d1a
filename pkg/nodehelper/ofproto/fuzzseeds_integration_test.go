//go:build integration

package ofproto

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
)

var recordSeeds = flag.Bool("record-seeds", false, "rewrite testdata/fuzz/FuzzUnixctlReply from a real ovs-vswitchd")

// rawCall sends one unixctl request and returns ovs-vswitchd's reply as
// it came (its first JSON value, byte for byte).
func rawCall(t *testing.T, socket, method string, params ...string) []byte {
	t.Helper()
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if params == nil {
		params = []string{}
	}
	if err := json.NewEncoder(conn).Encode(request{Method: method, Params: params}); err != nil {
		t.Fatal(err)
	}
	var raw json.RawMessage
	if err := json.NewDecoder(conn).Decode(&raw); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return raw
}

// The seeds of FuzzUnixctlReply are a real ovs-vswitchd's replies: with
// -record-seeds this rewrites them; without, it checks that the committed
// ones are still what this OVS answers (the same kind of reply, and a
// trace that parses to the same hops and datapath actions).
func TestIntegrationUnixctlFuzzSeeds(t *testing.T) {
	testenv.RequireOVS(t)
	n := ovstest.NewNode(t, 1)
	a := n.AddPod("demo", "a", 5)
	b := n.AddPod("demo", "b", 6)
	n.Pipeline()
	sock := n.CtlSocket()
	syn := fmt.Sprintf("in_port=%d,tcp,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_ttl=64,tp_src=40000,tp_dst=80,tcp_flags=syn",
		a.Ofport, a.MAC, n.GatewayMAC, a.IP, b.IP)
	dpif := rawCall(t, sock, "dpif/show")
	for name, trace := range map[string][]byte{
		"trace-delivered": rawCall(t, sock, "ofproto/trace", "br-int", syn),
		"trace-bad-flow":  rawCall(t, sock, "ofproto/trace", "br-int", "in_port=1,tcp,tp_dst=99999"),
		"trace-no-bridge": rawCall(t, sock, "ofproto/trace", "br-nope", syn),
		"unknown-command": rawCall(t, sock, "ofproto/traec", "br-int", syn),
	} {
		path := filepath.Join("testdata", "fuzz", "FuzzUnixctlReply", name)
		if *recordSeeds {
			writeSeed(t, path, trace, dpif)
			continue
		}
		seed := ovstest.ReadSeed(t, path)
		if len(seed) != 2 {
			t.Fatalf("%s: %d values, want 2", path, len(seed))
		}
		for i, pair := range [][2][]byte{{seed[0], trace}, {seed[1], dpif}} {
			old, oldOK := parseReply(pair[0])
			now, nowOK := parseReply(pair[1])
			if oldOK != nowOK {
				t.Errorf("%s, value %d: recorded %s, this OVS answers %s (go test -tags integration -record-seeds to record again)", path, i, pair[0], pair[1])
				continue
			}
			if !oldOK {
				continue
			}
			if i == 1 {
				if o, w := len(ParseDpifShow(old)), len(ParseDpifShow(now)); o != w {
					t.Errorf("%s: recorded dpif/show has %d ports, this OVS %d", path, o, w)
				}
				continue
			}
			o, w := Parse(old, "br-int"), Parse(now, "br-int")
			if o.DatapathActions != w.DatapathActions || len(o.Hops) != len(w.Hops) {
				t.Errorf("%s: recorded trace ends %q after %d hops, this OVS's %q after %d", path, o.DatapathActions, len(o.Hops), w.DatapathActions, len(w.Hops))
			}
		}
	}
}

// writeSeed writes a corpus file in Go's "go test fuzz v1" format, one
// []byte value per argument.
func writeSeed(t *testing.T, path string, values ...[]byte) {
	t.Helper()
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}
