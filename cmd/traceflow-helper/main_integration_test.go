//go:build integration

package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// helper runs this test binary as traceflow-helper.
func helper(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TRACEFLOW_HELPER_MAIN=1")
	return cmd
}

func runHelper(t *testing.T, args ...string) (int, []report.Line, string) {
	t.Helper()
	cmd := helper(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if *recordReportSeeds {
		recordSeeds(t, out.Bytes())
	}
	var lines []report.Line
	r := report.NewReader(&out)
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helper printed a bad line: %v\nstdout:\n%s", err, out.String())
		}
		lines = append(lines, l)
	}
	return code, lines, errb.String()
}

var recordReportSeeds = flag.Bool("record-report-seeds", false, "write every line the helper prints to pkg/nodehelper/report/testdata/fuzz/FuzzParseLine, as seeds recorded from a real helper run against real OVS")

// recordSeeds writes each line of a real helper's stdout as one seed of
// report's FuzzParseLine, named for the test and its place in the output.
func recordSeeds(t *testing.T, stdout []byte) {
	t.Helper()
	dir := filepath.Join("..", "..", "pkg", "nodehelper", "report", "testdata", "fuzz", "FuzzParseLine")
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // testdata of the repository
		t.Fatal(err)
	}
	run := seedRun.Add(1)
	for i, line := range bytes.Split(bytes.TrimSpace(stdout), []byte("\n")) {
		seed := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(line)))
		name := fmt.Sprintf("%s-run%d-line%d", strings.ReplaceAll(t.Name(), "/", "-"), run, i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(seed), 0o644); err != nil { //nolint:gosec // testdata of the repository
			t.Fatal(err)
		}
	}
}

var seedRun atomic.Int32

func newNode(t testing.TB) (*ovstest.Node, *ovstest.Pod, *ovstest.Pod) {
	t.Helper()
	testenv.RequireOVS(t)
	testenv.RequireCommands(t, "ethtool")
	n := ovstest.NewNode(t, 1)
	a := n.AddPod("default", "pod-a", 2)
	b := n.AddPod("default", "pod-b", 3)
	n.Pipeline()
	return n, a, b
}

// The CLI's exit codes and JSON lines: 0 delivered, 2 dropped, 3 not seen,
// 4 setup failure; ready first, result last.
func TestIntegrationCLIExitCodes(t *testing.T) {
	n, a, b := newNode(t)
	base := []string{"--ovs-rundir", n.Dir, "--bridge", n.Bridge, "--node", "node1"}
	code, lines, stderr := runHelper(t, append([]string{"trace", "--source-pod", "default/pod-a", "--destination", b.IP.String(), "--tcp", "80", "--tag", "7"}, base...)...)
	if code != 0 || len(lines) < 4 || lines[0].Type != report.TypeReady || lines[len(lines)-2].Type != report.TypeResult ||
		lines[len(lines)-1].Type != report.TypeCleanup || lines[len(lines)-1].Cleanup.FlowsLeft != 0 {
		t.Fatalf("delivered trace: exit %d, lines %+v, stderr %s", code, lines, stderr)
	}
	if r := lines[0].Ready; r.HelperVersion == "" || r.Tag != 7 || r.Node != "node1" || r.SourcePort != a.Port {
		t.Errorf("ready line %+v", r)
	}
	checkSetupSteps(t, lines[0].Ready.Setup, "ovsdb snapshot", "openflow connect", "table names", "source port", "ofproto/trace", "flow dumps", "plan", "install", "other")
	for _, proto := range [][]string{{"--icmp"}, {"--udp", "53"}} {
		if code, lines, stderr = runHelper(t, append(append([]string{"trace", "--source-pod", "default/pod-a", "--destination", b.IP.String(), "--tag", "6"}, proto...), base...)...); code != 0 {
			t.Errorf("%v trace: exit %d: %+v %s", proto, code, lines, stderr)
		}
	}
	n.DenyIngress(b)
	if code, lines, _ = runHelper(t, append([]string{"trace", "--in-port", a.Port, "--destination", b.IP.String(), "--udp", "53", "--tag", "8"}, base...)...); code != 2 {
		t.Errorf("dropped trace: exit %d, want 2: %+v %+v", code, lines, lines[len(lines)-1].Error)
	}
	// Without tunnels a probe can still arrive routed through the gateway:
	// the receiver waits for it there, and says it did not come.
	if code, lines, stderr = runHelper(t, append([]string{"receive", "--tag", "9", "--timeout", "300ms"}, base...)...); code != 3 ||
		lines[len(lines)-2].Explanation == nil || !strings.Contains(lines[len(lines)-2].Explanation.Summary, "arrived from another node") {
		t.Errorf("receive without tunnels: exit %d, want 3 and a result saying nothing arrived: %+v %s", code, lines, stderr)
	}
	if code, lines, _ = runHelper(t, "trace", "--ovs-rundir", n.Dir, "--bridge", "br-nope", "--in-port", a.Port, "--destination", b.IP.String()); code != 4 || lines[len(lines)-1].Type != report.TypeError {
		t.Errorf("unknown bridge: exit %d, want 4 and an error line: %+v", code, lines)
	}
}

// startReceiver runs `traceflow-helper receive` on n and returns it once it
// printed its ready line, with the rest of its output to read; the process
// is killed when the test ends, if it still runs.
func startReceiver(t *testing.T, n *ovstest.Node, tag int, timeout time.Duration) (*exec.Cmd, *bufio.Reader, report.Line) {
	t.Helper()
	cmd := helper("receive", "--ovs-rundir", n.Dir, "--bridge", n.Bridge, "--tag", strconv.Itoa(tag), "--timeout", timeout.String())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	rd := bufio.NewReader(stdout)
	line, err := rd.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	ready, err := report.ParseLine(line)
	if err != nil || ready.Type != report.TypeReady {
		t.Fatalf("first line %q: %v", line, err)
	}
	return cmd, rd, ready
}

// Done-when 8 (SIGKILL): a receiver killed mid-trace leaves only flows that
// OVS expires by itself, each with hard_timeout = the trace's timeout; the
// ready line comes only after the flows are installed. When OVS's
// revalidator gets round to the expiry depends on the machine, so the wait
// for the flows to go is bounded only to end a wait that would hang.
func TestIntegrationSIGKILLLeavesNothing(t *testing.T) {
	n, _, _ := newNode(t)
	other := ovstest.NewNode(t, 2)
	ovstest.Join(n, other)
	const timeout = 2 * time.Second
	cmd, _, ready := startReceiver(t, n, 33, timeout)
	filter := "cookie=" + ready.Ready.Cookie + "/0xffffffffffffff00"
	if got := strings.Count(n.DumpFlows(filter), "cookie="); got != ready.Ready.Flows || got == 0 {
		t.Fatalf("at ready, %d flows with the trace's cookie, want %d", got, ready.Ready.Flows)
	}
	hard := fmt.Sprintf("hard_timeout=%d", int(timeout/time.Second))
	for _, f := range strings.Split(strings.TrimSpace(n.DumpFlows(filter)), "\n") {
		if strings.Contains(f, "cookie=") && !strings.Contains(f, hard) {
			t.Errorf("a trace flow without %s would outlive a killed helper: %s", hard, f)
		}
	}
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	const hung = time.Minute
	for time.Since(killed) < timeout+hung {
		if strings.Count(n.DumpFlows(filter), "cookie=") == 0 {
			t.Logf("flows gone %s after SIGKILL (timeout %s)", time.Since(killed).Round(10*time.Millisecond), timeout)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("flows with the trace's cookie remain %s after SIGKILL, the hard timeout %s long past:\n%s", timeout+hung, timeout, n.DumpFlows(filter))
}

// A receiver stopped by SIGTERM while it waits (the plugin stops the
// receivers the probe did not reach, once the verdict is known) deletes its
// flows, and its last line says so: once that line is out, the bridge holds
// nothing of the trace.
func TestIntegrationSIGTERMCleanupLine(t *testing.T) {
	n, _, _ := newNode(t)
	other := ovstest.NewNode(t, 2)
	ovstest.Join(n, other)
	cmd, rd, ready := startReceiver(t, n, 35, 30*time.Second)
	filter := "cookie=" + ready.Ready.Cookie + "/0xffffffffffffff00"
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var last report.Line
	for {
		b, err := rd.ReadBytes('\n')
		if err != nil {
			break
		}
		l, err := report.ParseLine(b)
		if err != nil {
			t.Fatalf("line %q: %v", b, err)
		}
		if l.Type == report.TypeCleanup {
			// Checked before the process exits: the line alone must
			// be enough.
			if f := n.DumpFlows(filter); strings.Contains(f, "cookie=") {
				t.Fatalf("cleanup line %+v, but flows remain:\n%s", *l.Cleanup, f)
			}
		}
		last = l
	}
	_ = cmd.Wait()
	if last.Type != report.TypeCleanup || last.Cleanup.FlowsLeft != 0 || last.Cleanup.Cookie != ready.Ready.Cookie || last.Cleanup.Error != "" {
		t.Fatalf("last line %+v (cleanup %+v): want a cleanup line for cookie %s with no flows left", last, last.Cleanup, ready.Ready.Cookie)
	}
}

// A receiver that sees nothing exits 3 with a result line, leaving nothing.
func TestIntegrationCLIReceiveNotSeen(t *testing.T) {
	n, _, _ := newNode(t)
	other := ovstest.NewNode(t, 2)
	ovstest.Join(n, other)
	code, lines, stderr := runHelper(t, "receive", "--ovs-rundir", n.Dir, "--bridge", n.Bridge, "--tag", "34", "--timeout", "500ms")
	if code != 3 || lines[len(lines)-2].Type != report.TypeResult || lines[len(lines)-1].Type != report.TypeCleanup {
		t.Fatalf("exit %d, want 3 with a result line and a cleanup line: %+v %s", code, lines, stderr)
	}
	if f := n.DumpFlows(fmt.Sprintf("cookie=%s/0xffffffffffffff00", lines[0].Ready.Cookie)); strings.Contains(f, "cookie=") {
		t.Errorf("flows remain:\n%s", f)
	}
}

// Done-when 11: the stripped helper binary is at most 15 MB.
func TestIntegrationStrippedBinarySize(t *testing.T) {
	bin := t.TempDir() + "/traceflow-helper"
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stripped traceflow-helper: %.1f MB", float64(fi.Size())/1e6)
	if fi.Size() > 15_000_000 {
		t.Errorf("stripped binary is %d bytes, limit 15 MB", fi.Size())
	}
}

// A pod known only by OVN-Kubernetes' iface-id (on the Interface) is found,
// and the ready line says how.
func TestIntegrationCLIFindsOVNKubernetesPod(t *testing.T) {
	n, a, b := newNode(t)
	n.Vsctl("remove", "port", a.Port, "external_ids", "pod-name", "pod-namespace")
	n.Vsctl("set", "interface", a.Port, "external_ids:iface-id=default_pod-a")
	code, lines, stderr := runHelper(t, "trace", "--ovs-rundir", n.Dir, "--bridge", n.Bridge, "--source-pod", "default/pod-a",
		"--destination", b.IP.String(), "--tag", "9")
	if code != 0 || lines[0].Ready == nil || !strings.Contains(lines[0].Ready.PortMatch, "ovn-kubernetes") {
		t.Fatalf("exit %d, lines %+v, stderr %s", code, lines, stderr)
	}
}

// setupOrder is the order of the ready line's setup steps (FORMAT.md);
// a trace has those its work needs.
var setupOrder = []string{"ovsdb snapshot", "openflow connect", "table names", "ovn names", "source port",
	"ofproto/trace", "answer's catch", "flow dumps", "plan", "install", "revalidate", "other"}

// checkSetupSteps checks that a ready line times the setup's steps: each
// once, in setupOrder's order, with every step of need among them.
func checkSetupSteps(t *testing.T, steps []report.Step, need ...string) {
	t.Helper()
	last, seen := -1, map[string]bool{}
	for _, st := range steps {
		i := slices.Index(setupOrder, st.Step)
		if i <= last || st.Micros < 0 {
			t.Fatalf("setup steps %+v: %q (%d µs) is unknown, out of order, twice or negative", steps, st.Step, st.Micros)
		}
		last, seen[st.Step] = i, true
	}
	for _, n := range need {
		if !seen[n] {
			t.Errorf("setup steps %+v lack %q", steps, n)
		}
	}
}
