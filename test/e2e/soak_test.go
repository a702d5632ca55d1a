//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
)

// Issue 26, done-when 8: round trips leave real connections between the
// same pods alone. A loop of real HTTP requests from a to b, each on a
// connection of its own, runs through 20 round-trip traces from a to b on
// the same port: none of its requests fails. (A trace's probe and answer
// meet conntrack like any first packet of a connection: each node keeps
// their entry, closed by the source's RST to the unexpected SYN-ACK, for
// the datapath's closed-connection timeout; see the README.)
//
// Two of the traces are single runs, each with helper pods of its own;
// the other 18 are a check suite's, on shared helpers, several at once:
// the same probes and answers, the same conntrack entries, closer
// together, in a fraction of the time.
//
// The pods are the test's own: the loop leaves a conntrack entry per
// connection for a while, and the datapath's conntrack may refuse a later
// connection between the same two pods whose translated tuple meets one of
// them (seen in ovn mode: a request from the shared fixture's a to a
// Service over b timed out after the loop had run from a to b).
func TestRoundTripLeavesRealConnectionsAlone(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "soak")
	apply(t, podSpec(ns, "a", labNodes[0].name, map[string]string{"app": "soak-client"})+
		podSpec(ns, "b", labNodes[1].name, map[string]string{"app": "soak-server"}))
	pods := waitPods(t, ns, "a", "b")
	b := pods["b"].Status.PodIP
	stop := startSoak(t, kubectlEnv(), "kubectl", "exec", "-i", "-n", ns, "a", "--", "/workload", "soak", "-timeout", oracleTimeout, "http://"+b+":80/")
	const single, suite = 2, 18
	for i := range single {
		logWindow(t, fmt.Sprintf("round trip %d", i), func() {
			r := runTrace(t, "-n", ns, "a", "b", "--tcp", "80", "--round-trip")
			if r.code != 0 {
				t.Errorf("round trip %d: exit %d, want 0 (answered)", i, r.code)
			}
		})
	}
	var cases strings.Builder
	for i := range suite {
		fmt.Fprintf(&cases, "- {name: round trip %d, from: {pod: a}, to: {pod: b}, port: 80}\n", single+i)
	}
	var r checkRun
	logWindow(t, "the suite", func() {
		r = runCheck(t, fmt.Sprintf("apiVersion: %s\nkind: %s\ndefaults: {namespace: %s, roundTrip: true}\ncases:\n%s",
			check.APIVersion, check.Kind, ns, cases.String()), "-f", "-")
	})
	if r.code != 0 || len(r.cases) != suite {
		t.Errorf("the suite of %d round trips: exit %d with %d results, want 0 (every one answered) with %d", suite, r.code, len(r.cases), suite)
	}
	for _, c := range r.cases {
		if !c.Passed || c.Reply != "Answered" {
			t.Errorf("%q: %s, answer %q (%s), want answered", c.Case, c.Verdict, c.Reply, c.Message)
		}
	}
	stop(single + suite)
	assertNothingLeft(t)
}

// startSoak starts the workload's soak command (name and args, with env),
// a loop of real requests each on a new connection, and returns once it
// runs; stop ends it and checks that none of its requests failed and that
// it made at least min of them.
func startSoak(t *testing.T, env []string, name string, args ...string) (stop func(min int)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "soak started" {
		_ = stdin.Close()
		t.Fatalf("the loop of real requests did not start: %q %s", lines.Text(), stderr.String())
	}
	return func(min int) {
		t.Helper()
		_ = stdin.Close()
		var last string
		var failed []string
		for lines.Scan() {
			last = lines.Text()
			if strings.HasPrefix(last, "failure ") {
				failed = append(failed, last)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		werr := cmd.Wait()
		t.Logf("real requests beside the traces: %s (%v) %s", last, werr, stderr.String())
		fields := map[string]string{}
		for _, kv := range strings.Fields(last) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				fields[k] = v
			}
		}
		count, _ := strconv.Atoi(fields["count"])
		if werr != nil || fields["result"] != "served" || fields["failures"] != "0" || count < min {
			t.Errorf("the loop of real requests met failures: %q (%v)\n%s", last, werr, strings.Join(failed, "\n"))
		}
	}
}

// soakStamp is the wall-clock format of a soak's failure lines.
const soakStamp = "15:04:05.000"

// logWindow runs f and logs when it ran, in the soak's format, so that a
// request of the loop that failed can be set beside what ran meanwhile.
func logWindow(t *testing.T, what string, f func()) {
	t.Helper()
	began := time.Now()
	f()
	t.Logf("%s: from %s to %s", what, began.Format(soakStamp), time.Now().Format(soakStamp))
}
