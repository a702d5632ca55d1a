//go:build integration

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// serveProc is a running `traceflow-helper serve` whose lines are read as
// they come, by trace id.
type serveProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan report.Line
	got   map[string][]report.Line
	errb  bytes.Buffer
	// out is serve's standard output: its JSON lines and its log.
	out *splitOutput
}

func startServe(t *testing.T) *serveProc {
	t.Helper()
	s := &serveProc{cmd: helper("serve"), lines: make(chan report.Line, 1000), got: map[string][]report.Line{}}
	s.cmd.Env = append(s.cmd.Env, "NODE_NAME=node2")
	s.cmd.Stderr = &s.errb
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill() })
	s.out = split(stdout)
	go func() {
		defer close(s.lines)
		// serve's log comes between its JSON lines (split keeps it apart).
		r := s.out
		for {
			l, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Errorf("serve printed a bad line: %v", err)
				}
				return
			}
			s.lines <- l
		}
	}()
	return s
}

func (s *serveProc) send(t *testing.T, cmd string) {
	t.Helper()
	if _, err := io.WriteString(s.stdin, cmd+"\n"); err != nil {
		t.Fatal(err)
	}
}

// until reads lines until trace id ("" for serve's own lines) has one of
// type typ, and returns it (at once if it has been read already).
func (s *serveProc) until(t *testing.T, id string, typ report.LineType) report.Line {
	t.Helper()
	for _, l := range s.got[id] {
		if l.Type == typ {
			return l
		}
	}
	timeout := time.After(40 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("serve's output ended before a %s line of %q; lines %+v\nstderr:\n%s", typ, id, s.got, s.errb.String())
			}
			s.got[l.Trace] = append(s.got[l.Trace], l)
			if l.Trace == id && l.Type == typ {
				return l
			}
		case <-timeout:
			t.Fatalf("no %s line of %q within 40 s; lines %+v", typ, id, s.got)
		}
	}
}

// drain reads serve's lines to the end of its output.
func (s *serveProc) drain(t *testing.T) {
	t.Helper()
	timeout := time.After(40 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return
			}
			s.got[l.Trace] = append(s.got[l.Trace], l)
		case <-timeout:
			t.Fatalf("serve's output did not end within 40 s; lines %+v", s.got)
		}
	}
}

// One serve process on node 2 runs four traces at once on one bridge: a
// receive that a one-shot sender on node 1 reaches, two receives that wait,
// and a sender of its own. Each trace's lines carry its id and run ready,
// ..., result, cleanup; stop ends one waiting receive with its cleanup
// line; the end of input ends the other, and serve exits 0 once it has,
// leaving no flow of any of them.
func TestIntegrationServeManyTraces(t *testing.T) {
	testenv.RequireOVS(t)
	testenv.RequireCommands(t, "ethtool")
	n1, n2 := ovstest.NewNode(t, 1), ovstest.NewNode(t, 2)
	a := n1.AddPod("default", "pod-a", 2)
	b := n2.AddPod("default", "pod-b", 2)
	ovstest.Join(n1, n2)
	n1.Pipeline()
	n2.Pipeline()

	s := startServe(t)
	if l := s.until(t, "", report.TypeServing); l.Serving.Node != "node2" || len(s.got[""]) != 1 {
		t.Fatalf("serve's first lines %+v, want the serving line first", s.got)
	}
	receive := func(id string, tag int, timeout string) string {
		return fmt.Sprintf(`{"id":%q,"args":["receive","--ovs-rundir",%q,"--bridge",%q,"--tag","%d","--timeout",%q]}`, id, n2.Dir, n2.Bridge, tag, timeout)
	}
	s.send(t, receive("recv", 31, "20s"))
	s.send(t, receive("idle", 32, "30s"))
	s.send(t, receive("last", 33, "30s"))
	cookies := map[string]string{}
	for _, id := range []string{"recv", "idle", "last"} {
		cookies[id] = s.until(t, id, report.TypeReady).Ready.Cookie
	}
	// serve's own sender, pod-b to pod-a across the tunnel, while node 1's
	// one-shot sender sends to recv.
	s.send(t, fmt.Sprintf(`{"id":"send","args":["trace","--ovs-rundir",%q,"--bridge",%q,"--source-pod","default/pod-b","--destination",%q,"--tcp","80","--tag","34"]}`,
		n2.Dir, n2.Bridge, a.IP.String()))
	code, lines, stderr := runHelper(t, "trace", "--ovs-rundir", n1.Dir, "--bridge", n1.Bridge, "--source-pod", "default/pod-a",
		"--destination", b.IP.String(), "--tcp", "80", "--tag", "31")
	if code != 0 {
		t.Fatalf("node 1's sender: exit %d, lines %+v, stderr %s", code, lines, stderr)
	}
	for _, id := range []string{"recv", "send"} {
		s.until(t, id, report.TypeCleanup)
		checkTrace(t, id, s.got[id], 0)
		if id == "send" {
			cookies[id] = s.got[id][0].Ready.Cookie
		}
	}
	if l := s.got["recv"]; l[len(l)-2].Result.Observations[len(l[len(l)-2].Result.Observations)-1].Action != report.ActionDelivered {
		t.Errorf("recv's result %+v, want the probe delivered to pod-b", l[len(l)-2].Result)
	}
	for _, id := range []string{"idle", "last"} {
		if got := s.got[id]; len(got) != 1 {
			t.Fatalf("%s printed %+v while it should still wait", id, got)
		}
	}

	s.send(t, `{"id":"idle","stop":true}`)
	s.until(t, "idle", report.TypeCleanup)
	checkTrace(t, "idle", s.got["idle"], 3)
	if f := n2.DumpFlows("cookie=" + cookies["idle"] + "/0xffffffffffffff00"); strings.Contains(f, "cookie=") {
		t.Errorf("idle stopped, but its flows remain:\n%s", f)
	}
	if got := s.got["last"]; len(got) != 1 {
		t.Fatalf("stopping idle ended last too: %+v", got)
	}

	_ = s.stdin.Close()
	s.drain(t)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve after the end of its input: %v; stderr:\n%s", err, s.errb.String())
	}
	checkTrace(t, "last", s.got["last"], 3)
	for id, lines := range s.got {
		if _, ok := cookies[id]; !ok && id != "" || id == "" && len(lines) != 1 {
			t.Errorf("lines of %q: %+v; want only the traces' lines and the serving line", id, lines)
		}
	}
	for id, c := range cookies {
		if f := n2.DumpFlows("cookie=" + c + "/0xffffffffffffff00"); strings.Contains(f, "cookie=") {
			t.Errorf("flows of %s remain after serve exited:\n%s", id, f)
		}
	}
	// The log is on standard output, between the JSON lines.
	for _, want := range []string{"idle: stopping", "last: ended, exit code 3", "recv: ended, exit code 0"} {
		if !strings.Contains(s.out.log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, s.out.log.String())
		}
	}
}

// checkTrace checks one trace's lines from serve: ready first, then the
// result with exit code want, then a cleanup line that left nothing.
func checkTrace(t *testing.T, id string, lines []report.Line, want int) {
	t.Helper()
	n := len(lines)
	if n < 3 || lines[0].Type != report.TypeReady || lines[n-2].Type != report.TypeResult || lines[n-1].Type != report.TypeCleanup {
		t.Fatalf("%s's lines %+v: want ready, ..., result, cleanup", id, lines)
	}
	if c := *lines[n-2].ExitCode; c != want {
		t.Errorf("%s's result: exit code %d, want %d (%s)", id, c, want, lines[n-2].Explanation.Summary)
	}
	if c := lines[n-1].Cleanup; c.FlowsLeft != 0 || c.Error != "" || c.Cookie != lines[0].Ready.Cookie {
		t.Errorf("%s's cleanup %+v, want no flows left of cookie %s", id, *c, lines[0].Ready.Cookie)
	}
	for _, l := range lines {
		if l.Trace != id {
			t.Errorf("a line of %s carries trace %q", id, l.Trace)
		}
	}
}
