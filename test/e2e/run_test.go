//go:build e2e

package e2e

// Running the plugin through the real kubectl, and what a run leaves behind.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// traceRun is one run of the plugin through the real kubectl.
type traceRun struct {
	code           int
	stdout, stderr string
	record         *traceflow.Traceflow
}

// runKubectl runs the real kubectl with stdin and returns its output and
// exit code; a kubectl that cannot run at all fails the test.
func runKubectl(ctx context.Context, t testing.TB, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code, err := kubectlRun(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return stdout, stderr, code
}

// kubectlRun is runKubectl for any goroutine: a kubectl that cannot run at
// all is an error to return, since only the test's own goroutine may end
// the test.
func kubectlRun(ctx context.Context, stdin string, args ...string) (stdout, stderr string, code int, err error) {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = kubectlEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var ee *exec.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &ee):
		code = ee.ExitCode()
	default:
		err = fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), runErr)
	}
	return out.String(), errb.String(), code, err
}

// withEngine is args, plus --engine helper in the lab's Antrea mode where
// args name no engine: there --engine auto picks Antrea's agents, and the
// tests that name no engine are helper-mode tests (agent-mode tests say
// --engine: agentTrace, compareTrace).
func withEngine(args []string) []string {
	if labMode() == modeAntrea && !slices.Contains(args, "--engine") {
		return append(slices.Clip(args), "--engine", "helper")
	}
	return args
}

// runTrace runs `kubectl traceflow ARGS -o json` and decodes the record.
func runTrace(t testing.TB, args ...string) traceRun {
	t.Helper()
	r, err := traceRunErr(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runTracesAtOnce runs one trace per argument list, all at once, and
// returns them in order once all have ended; what would end the test is
// reported from the test's own goroutine.
func runTracesAtOnce(t testing.TB, argLists ...[]string) []traceRun {
	t.Helper()
	runs := make([]traceRun, len(argLists))
	errs := make([]error, len(argLists))
	var wg sync.WaitGroup
	for i, args := range argLists {
		wg.Go(func() { runs[i], errs[i] = traceRunErr(t, args...) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return runs
}

// traceRunErr is runTrace for any goroutine: it logs and marks failures
// (t.Logf and t.Errorf may be called from any goroutine) and returns what
// would end the test.
func traceRunErr(t testing.TB, args ...string) (traceRun, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	full := append([]string{"traceflow"}, withEngine(args)...)
	full = append(full, "-o", "json")
	var r traceRun
	var err error
	r.stdout, r.stderr, r.code, err = kubectlRun(ctx, "", full...)
	if err != nil {
		return r, err
	}
	if strings.TrimSpace(r.stdout) != "" {
		r.record = &traceflow.Traceflow{}
		if err := json.Unmarshal([]byte(r.stdout), r.record); err != nil {
			return r, fmt.Errorf("-o json is not a Traceflow: %w\n%s", err, r.stdout)
		}
	}
	t.Logf("kubectl %s: exit %d\n%s%s", strings.Join(full, " "), r.code, r.stderr, r.stdout)
	remember(r)
	// client-go's own logging (klog: "E1201 06:12:58.820437 ... Copying
	// stdout failed") must not reach the user's terminal: streams torn
	// down as a trace ends are no error of theirs.
	if m := klogLine.FindString(r.stderr); m != "" {
		t.Errorf("client-go's log reached stderr: %q", m)
	}
	return r, nil
}

// klogLine is a klog header: severity, date, time, thread id, file:line.
var klogLine = regexp.MustCompile(`(?m)^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ \S+:\d+\] .*$`)

func (r traceRun) result(t testing.TB, node string) report.NodeResult {
	t.Helper()
	if r.record != nil {
		for _, res := range r.record.Status.Results {
			if res.Node == node {
				return res
			}
		}
	}
	t.Fatalf("no result from node %s in the record", node)
	return report.NodeResult{}
}

func last(res report.NodeResult) report.Observation {
	if len(res.Observations) == 0 {
		return report.Observation{}
	}
	return res.Observations[len(res.Observations)-1]
}

// assertNothingLeft checks item 4 of issue 5 for this run's traces (the
// lab is shared, see scope_test.go): no helper pod, no tag claim, no record
// (unless kept), and no flow with one of their tags' cookies on any node.
func assertNothingLeft(t testing.TB, keptRecords ...string) {
	t.Helper()
	if left := ourObjects(t, "pods"); len(left) > 0 {
		// Deletion is asynchronous in the kubelet; the API object goes at once
		// with grace period 0, so anything listed here is a leak.
		t.Errorf("helper pods left: %s", left)
	}
	if left := ourObjects(t, "leases"); len(left) > 0 {
		t.Errorf("tag claims left: %s", left)
	}
	for _, line := range ourObjects(t, "traceflows") {
		kept := false
		for _, k := range keptRecords {
			kept = kept || strings.HasSuffix(line, "/"+k)
		}
		if !kept {
			t.Errorf("trace record left: %s", line)
		}
	}
	for _, n := range labNodes {
		if flows := ourFlows(traceFlows(t, n.name)); flows != "" {
			t.Errorf("trace flows left on %s:\n%s", n.name, flows)
		}
	}
}

// traceFlows lists the flows on a node that carry a trace's cookie (the
// helper's cookies all start with 0x7466, "tf").
func traceFlows(t testing.TB, node string) string {
	t.Helper()
	out := nodeExec(t, node, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int", "cookie=0x7466000000000000/0xffff000000000000")
	var flows []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "cookie=") {
			flows = append(flows, l)
		}
	}
	return strings.Join(flows, "\n")
}
