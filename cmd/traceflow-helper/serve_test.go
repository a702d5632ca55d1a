package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// hangingOVS is an OVS run directory whose OVSDB socket accepts
// connections and never answers: a trace started on it runs (waits for
// OVSDB) until it is stopped, which lets serve's bookkeeping be tested
// without OVS.
func hangingOVS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "db.sock"))
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return dir
}

// receiveCmd is a command starting a receive on rundir.
func receiveCmd(id, rundir string, extra ...string) string {
	args := append([]string{"receive", "--ovs-rundir", rundir, "--tag", "5", "--timeout", "20s"}, extra...)
	b := &strings.Builder{}
	b.WriteString(`{"id":"` + id + `","args":[`)
	for i, a := range args {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"` + a + `"`)
	}
	b.WriteString("]}\n")
	return b.String()
}

// serveAll runs serve on the given standard input to its end.
func serveAll(t *testing.T, stdin string, flags ...string) (int, []report.Line, string) {
	t.Helper()
	var out, errb bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(context.Background(), append([]string{"serve"}, flags...), strings.NewReader(stdin), &out, &errb)
	}()
	var code int
	select {
	case code = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after the end of its input")
	}
	sp := split(&out)
	return code, readLines(t, sp), errb.String() + sp.log.String()
}

// readLines reads serve's JSON lines to their end.
func readLines(t *testing.T, sp *splitOutput) []report.Line {
	t.Helper()
	var lines []report.Line
	for {
		l, err := sp.Next()
		if errors.Is(err, io.EOF) {
			return lines
		}
		if err != nil {
			t.Fatalf("serve printed a bad line: %v", err)
		}
		lines = append(lines, l)
	}
}

// splitOutput is serve's standard output read to its end in the
// background: its JSON lines, in order, for Next, and its log (plain text
// lines between them) in log. Reading in the background keeps serve from
// waiting on a test that only wants the next JSON line.
type splitOutput struct {
	lines chan []byte
	log   lockedBuffer
}

func split(r io.Reader) *splitOutput {
	sp := &splitOutput{lines: make(chan []byte, 4096)}
	go func() {
		defer close(sp.lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 8*1024*1024)
		for sc.Scan() {
			b := append([]byte(nil), sc.Bytes()...)
			switch {
			case len(b) == 0:
			case b[0] == '{':
				sp.lines <- b
			default:
				_, _ = sp.log.Write(append(b, '\n'))
			}
		}
	}()
	return sp
}

// Next returns the next JSON line; io.EOF at the end.
func (sp *splitOutput) Next() (report.Line, error) {
	b, ok := <-sp.lines
	if !ok {
		return report.Line{}, io.EOF
	}
	return report.ParseLine(b)
}

// linesOf returns the lines of trace id ("" for serve's own).
func linesOf(lines []report.Line, id string) []report.Line {
	var of []report.Line
	for _, l := range lines {
		if l.Trace == id {
			of = append(of, l)
		}
	}
	return of
}

// End of input with nothing running: the serving line, nothing else, exit 0.
func TestServeServingLineFirstAndEOFExits0(t *testing.T) {
	t.Setenv("NODE_NAME", "node7")
	code, lines, stderr := serveAll(t, "")
	if code != 0 || len(lines) != 1 {
		t.Fatalf("exit %d, lines %+v, want 0 and the serving line only; stderr %s", code, lines, stderr)
	}
	if l := lines[0]; l.Type != report.TypeServing || l.Serving.Node != "node7" || l.Serving.HelperVersion == "" || l.Trace != "" {
		t.Errorf("first line %+v (serving %+v)", l, l.Serving)
	}
}

// A hello is answered with a serving line like the first, before the
// commands after it are acted on; a hello with args or stop is no hello.
func TestServeAnswersHello(t *testing.T) {
	t.Setenv("NODE_NAME", "node7")
	code, lines, stderr := serveAll(t, `{"hello":true}`+"\n"+`{"hello":true,"id":"x","stop":true}`+"\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("exit %d, lines %+v, want 0 and two serving lines; stderr %s", code, lines, stderr)
	}
	for _, l := range lines {
		if l.Type != report.TypeServing || l.Serving.Node != "node7" || l.Serving.HelperVersion == "" || l.Trace != "" {
			t.Errorf("line %+v (serving %+v), want a serving line", l, l.Serving)
		}
	}
}

// A command serve cannot act on gets one usage error line (with the
// trace's id where it named one), and serve goes on reading commands: the
// trace started after them runs (here to a setup error, there being no OVS).
func TestServeRefusesBadCommandsAndGoesOn(t *testing.T) {
	noOVS := t.TempDir()
	for name, tc := range map[string]struct {
		cmd, id, want string
	}{
		"not json":        {"hello\n", "", "one JSON object a line"},
		"not an object":   {"[1,2]\n", "", "one JSON object a line"},
		"no id":           {`{"args":["receive","--tag","5"]}` + "\n", "", "needs an id"},
		"neither":         {`{"id":"x"}` + "\n", "x", "needs args"},
		"both":            {`{"id":"x","stop":true,"args":["receive"]}` + "\n", "x", "not both"},
		"unknown mode":    {`{"id":"x","args":["serve"]}` + "\n", "x", "unknown command"},
		"bad flag":        {`{"id":"x","args":["receive","--tag","5","--frob"]}` + "\n", "x", "flag provided but not defined"},
		"receive no tag":  {`{"id":"x","args":["receive"]}` + "\n", "x", "--tag is required"},
		"trace no source": {`{"id":"x","args":["trace","--destination","10.0.0.1"]}` + "\n", "x", "exactly one of --source-pod"},
		"help":            {`{"id":"x","args":["receive","--help"]}` + "\n", "x", "--help"},
		"too long":        {strings.Repeat("x", maxCommand+10) + "\n", "", "longer than"},
		"inject on stdin": {`{"id":"x","args":["trace","--inject-on-stdin","--in-port","p","--destination","10.0.0.1"]}` + "\n", "x", "--inject-on-stdin"},
		"stop unknown":    {`{"id":"gone","stop":true}` + "\n", "", ""},
		"blank line":      {"\n  \n", "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			code, lines, stderr := serveAll(t, tc.cmd+receiveCmd("after", noOVS))
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr %s", code, stderr)
			}
			if lines[0].Type != report.TypeServing {
				t.Fatalf("first line %+v, want the serving line", lines[0])
			}
			refused := linesOf(lines[1:], tc.id)
			if tc.want == "" {
				refused = nil
			}
			switch {
			case tc.want == "" && len(lines) != 2:
				t.Errorf("lines %+v: want the serving line and the next trace's only", lines)
			case tc.want != "" && (len(refused) != 1 || refused[0].Type != report.TypeError || refused[0].Error.Code != report.ErrorUsage ||
				!strings.Contains(refused[0].Error.Message, tc.want)):
				t.Errorf("lines for %q: %+v, want one usage error saying %q", tc.id, refused, tc.want)
			}
			after := linesOf(lines, "after")
			if len(after) != 1 || after[0].Type != report.TypeError || after[0].Error.Code != report.ErrorSetup {
				t.Errorf("the next trace's lines %+v: want it to have run (to a setup error, without OVS)", after)
			}
		})
	}
}

// A second trace with the id of a running one is refused, and the running
// one goes on until the end of input stops it.
func TestServeDuplicateID(t *testing.T) {
	dir := hangingOVS(t)
	code, lines, stderr := serveAll(t, receiveCmd("a", dir)+receiveCmd("a", dir))
	a := linesOf(lines, "a")
	if code != 0 || len(a) != 2 {
		t.Fatalf("exit %d, lines of a %+v; stderr %s", code, a, stderr)
	}
	if a[0].Error == nil || a[0].Error.Code != report.ErrorUsage || !strings.Contains(a[0].Error.Message, "running already") {
		t.Errorf("first line of a %+v: want a usage error about the running trace", a[0].Error)
	}
	// The first a ran until the end of input stopped it (it never got
	// past OVSDB, so it ends with a setup error rather than a cleanup).
	if a[1].Error == nil || a[1].Error.Code != report.ErrorSetup {
		t.Errorf("last line of a %+v: want the running trace's own end", a[1].Error)
	}
}

// --max-traces refuses a trace beyond the limit, with an error line for it.
func TestServeMaxTraces(t *testing.T) {
	dir := hangingOVS(t)
	code, lines, _ := serveAll(t, receiveCmd("a", dir)+receiveCmd("b", dir), "--max-traces", "1")
	b := linesOf(lines, "b")
	if code != 0 || len(b) != 1 || b[0].Error == nil || b[0].Error.Code != report.ErrorUsage || !strings.Contains(b[0].Error.Message, "--max-traces 1") {
		t.Fatalf("exit %d, lines of b %+v", code, b)
	}
}

func TestServeUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"serve", "extra"}, {"serve", "--max-traces", "0"}, {"serve", "--frob"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &out, &errb); code != 1 || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q; want 1 and nothing on stdout", args, code, out.String())
		}
	}
}

// stop ends one trace (its last line comes out) while the others and
// serve itself go on; the end of input then ends the rest, and serve exits
// 0 only after their last lines.
func TestServeStopOneTrace(t *testing.T) {
	dir := hangingOVS(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"serve"}, inR, outW, &errb)
		_ = outW.Close()
	}()
	rd := split(outR)
	next := func() report.Line {
		t.Helper()
		l, err := rd.Next()
		if err != nil {
			t.Fatalf("reading serve's output: %v; log %s%s", err, errb.String(), rd.log.String())
		}
		return l
	}
	if l := next(); l.Type != report.TypeServing {
		t.Fatalf("first line %+v", l)
	}
	if _, err := io.WriteString(inW, receiveCmd("a", dir)+receiveCmd("b", dir)+`{"id":"a","stop":true}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if l := next(); l.Trace != "a" || l.Type != report.TypeError {
		t.Fatalf("after stop a, line %+v: want a's last line", l)
	}
	_ = inW.Close()
	if l := next(); l.Trace != "b" || l.Type != report.TypeError {
		t.Fatalf("after the end of input, line %+v: want b's last line", l)
	}
	if code := <-done; code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after exit: %v, want EOF", err)
	}
	// The log is on standard output, between the JSON lines (see
	// report.Writer.Text); nothing goes to standard error.
	for _, want := range []string{"a: stopping", "a: ended", "b: ended", "every trace stopped"} {
		if !strings.Contains(rd.log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, rd.log.String())
		}
	}
	if errb.String() != "" {
		t.Errorf("serve wrote to standard error: %q", errb.String())
	}
}

// SIGTERM (the context) stops every trace as the end of input does.
func TestServeSignalStopsEveryTrace(t *testing.T) {
	dir := hangingOVS(t)
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve"}, inR, outW, io.Discard)
		_ = outW.Close()
	}()
	rd := split(outR)
	if l, err := rd.Next(); err != nil || l.Type != report.TypeServing {
		t.Fatalf("first line %+v: %v", l, err)
	}
	// Commands are handled in order: once the bad one is refused, a runs.
	if _, err := io.WriteString(inW, receiveCmd("a", dir)+"barrier\n"); err != nil {
		t.Fatal(err)
	}
	if l, err := rd.Next(); err != nil || l.Type != report.TypeError || l.Trace != "" {
		t.Fatalf("line %+v: %v, want the refusal of the bad command", l, err)
	}
	cancel()
	lines := readLines(t, rd)
	if code := <-done; code != 0 || len(lines) != 1 || lines[0].Trace != "a" {
		t.Fatalf("exit %d, lines %+v: want 0 after a's last line", code, lines)
	}
}

// A read error on standard input stops every trace, then exits 4.
func TestServeReadErrorExits4(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"serve"}, io.MultiReader(strings.NewReader("hello\n"), errReader{}), &out, &errb)
	lines := readLines(t, split(&out))
	if code != 4 || len(lines) != 3 || lines[2].Error == nil || lines[2].Error.Code != report.ErrorSetup {
		t.Fatalf("exit %d, lines %+v: want 4 and a setup error last", code, lines)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("input/output error") }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
