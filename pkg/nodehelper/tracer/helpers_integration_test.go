//go:build integration

package tracer_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/tracer"
)

// syncBuffer is a bytes.Buffer safe for a writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// readySignal passes a report on to w and closes ready once the ready line
// has been written (the report writer writes each line with one Write).
type readySignal struct {
	w     io.Writer
	ready chan struct{}
	once  sync.Once
}

func (r *readySignal) Write(p []byte) (int, error) {
	n, err := r.w.Write(p)
	if bytes.Contains(p, []byte(`"type":"ready"`)) {
		r.once.Do(func() { close(r.ready) })
	}
	return n, err
}

// seq feeds the traces' Random: concurrent traces (TestIntegrationIsolation)
// call it from their own goroutines, and two traces that read the same
// value would share a cookie and a controller id, and see each other's
// packet-ins.
var seq atomic.Uint32

func common(n *ovstest.Node, tag uint8, out io.Writer, t *testing.T) tracer.Common {
	return tracer.Common{
		Rundir: n.Dir, Bridge: n.Bridge, Node: n.Name, Tag: tag, Timeout: 5 * time.Second,
		Out:  report.NewWriter(out, nil),
		Logf: t.Logf,
		Random: func() uint32 {
			return seq.Add(1) * 7919
		},
	}
}

func parseLines(t *testing.T, s string) []report.Line {
	t.Helper()
	var out []report.Line
	r := report.NewReader(strings.NewReader(s))
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("bad report line: %v\n%s", err, s)
		}
		out = append(out, l)
	}
}

// traced runs a sender trace and returns its outcome and report lines.
func traced(t *testing.T, spec tracer.TraceSpec) (tracer.Outcome, []report.Line) {
	t.Helper()
	var buf syncBuffer
	spec.Out = report.NewWriter(&buf, nil)
	out, err := tracer.Trace(context.Background(), spec)
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, buf.String())
	}
	lines := parseLines(t, buf.String())
	for _, l := range lines {
		if l.Type == report.TypeObservation {
			t.Logf("observation: %+v hop=%+v", *l.Observation, l.Hop)
		}
	}
	return out, lines
}

func observations(lines []report.Line) []report.Observation {
	var out []report.Observation
	for _, l := range lines {
		if l.Type == report.TypeObservation {
			out = append(out, *l.Observation)
		}
	}
	return out
}

// result returns the result line, which comes right before the last line:
// the cleanup line, which must say the trace's flows are gone.
func result(t *testing.T, lines []report.Line) report.Line {
	t.Helper()
	if len(lines) < 2 || lines[len(lines)-1].Type != report.TypeCleanup || lines[len(lines)-2].Type != report.TypeResult {
		t.Fatalf("report does not end with a result line and a cleanup line: %+v", lines)
	}
	if c := lines[len(lines)-1].Cleanup; c.FlowsLeft != 0 || c.Error != "" || c.Cookie == "" {
		t.Fatalf("cleanup line %+v: want no flows left, no error, the trace's cookie", *c)
	}
	lines = lines[:len(lines)-1]
	if lines[0].Type != report.TypeReady {
		t.Fatalf("report does not start with a ready line: %+v", lines[0])
	}
	return lines[len(lines)-1]
}

var tableLineRE = regexp.MustCompile(`^\s*(\d+)\. `)

// ovsTables runs `ovs-appctl ofproto/trace` (the independent oracle) for
// the packet and returns the tables it visits in br-int.
func ovsTables(t *testing.T, n *ovstest.Node, flow string, pkt []byte) []int {
	t.Helper()
	text := n.Appctl("ofproto/trace", n.Bridge, flow, hex.EncodeToString(pkt))
	var tables []int
	in := true
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "bridge(") {
			in = strings.Contains(l, `"`+n.Bridge+`"`)
			continue
		}
		if m := tableLineRE.FindStringSubmatch(l); m != nil && in {
			v, _ := strconv.Atoi(m[1])
			tables = append(tables, v)
		}
	}
	return tables
}

// checkAgainstOVS compares the helper's hop list with OVS's own trace of
// the same packet (done-when item 7).
func checkAgainstOVS(t *testing.T, n *ovstest.Node, flow string, pkt []byte, res report.Line) {
	t.Helper()
	want := ovsTables(t, n, flow, pkt)
	var got []int
	for _, h := range res.Explanation.Hops {
		got = append(got, int(h.Table))
	}
	if !equalInts(got, want) {
		t.Errorf("helper's hops visit tables %v, ovs-appctl ofproto/trace visits %v", got, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func probeFor(t *testing.T, src *ovstest.Pod, dstIP netip.Addr, dstMAC string, proto probe.Protocol, port uint16, tag uint8) []byte {
	t.Helper()
	s := probe.Spec{SrcMAC: src.HWAddr(), SrcIP: src.IP, DstIP: dstIP, Protocol: proto, DstPort: port, TCPFlags: 0x02, Tag: tag, ICMPID: uint16(tag), ICMPSeq: 1}
	if dstIP.Is6() {
		s.SrcIP = src.IPv6
	}
	if proto != probe.ICMP {
		s.SrcPort = 32768 + uint16(tag)
	}
	s.DstMAC = mustMAC(dstMAC)
	pkt, err := probe.Build(s)
	if err != nil {
		t.Fatal(err)
	}
	return pkt
}

func requireOVS(t *testing.T) {
	t.Helper()
	testenv.RequireOVS(t)
	testenv.RequireCommands(t, "ethtool")
}

// serveTCP has each pod listen on port for the test's life.
func (o *oneNode) serveTCP(t *testing.T, port int, pods ...*ovstest.Pod) {
	t.Helper()
	for _, p := range pods {
		if err := p.ServeTCP(o.ctx, port); err != nil {
			t.Fatal(err)
		}
	}
}
