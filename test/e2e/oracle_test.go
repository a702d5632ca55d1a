//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// outcome is what real traffic met, as the workload's clients report it
// (test/lab/cmd/workload): the ground truth a trace's verdict must agree with.
type outcome string

const (
	served   outcome = "served"
	refused  outcome = "refused"
	timedOut outcome = "timed-out"
)

// probe is one flow of real traffic: from a pod to dst (an IP) on proto
// ("tcp", "udp" or "icmp") and port (unused for icmp).
type probe struct {
	ns, pod, proto, dst string
	port                int
}

// oracleTimeout is the workload client's own timeout: a SYN the lab drops is
// answered by nothing, and 2 s is far beyond the lab's round trip (under
// 5 ms) while keeping a dropped case short.
const oracleTimeout = "2s"

// realTraffic sends the probe's traffic from its pod with the workload
// client (kubectl exec) and returns what it met. The client's exit code and
// its result line must agree; anything else fails the test, since without
// an oracle there is nothing to judge the trace by.
func realTraffic(t testing.TB, p probe) outcome {
	t.Helper()
	got, _ := realTrafficTimed(t, p)
	return got
}

// realTrafficTimed is realTraffic with the time the workload client took
// (its time= field; 0 where it printed none). A TCP connection that took a
// second or more had its first SYN go unanswered: the kernel's first
// retransmission comes after 1 s.
func realTrafficTimed(t testing.TB, p probe) (outcome, time.Duration) {
	t.Helper()
	got, took, _ := realTrafficResult(t, p)
	return got, took
}

// realTrafficResult is realTrafficTimed with the client's result line,
// which says more than the outcome (what came back, and from where).
func realTrafficResult(t testing.TB, p probe) (outcome, time.Duration, string) {
	t.Helper()
	return runWorkload(t, p, kubectlEnv(), "kubectl", append([]string{"exec", "-n", p.ns, p.pod, "--", "/workload"}, workloadArgs(t, p)...)...)
}

// nodeTraffic is realTraffic sent by node itself, from its own network
// namespace (as the kubelet's probes are): the workload binary the lab
// built, run there with lab.sh exec. p's pod and namespace are unused.
func nodeTraffic(t testing.TB, node string, p probe) outcome {
	t.Helper()
	args := append([]string{"exec", node, filepath.Join(repoRoot(), "bin", "lab", "workload")}, workloadArgs(t, p)...)
	got, _, _ := runWorkload(t, p, nil, labScript(), args...)
	return got
}

// workloadArgs are the workload client's arguments for p.
func workloadArgs(t testing.TB, p probe) []string {
	t.Helper()
	switch p.proto {
	case "tcp":
		return []string{"get", "-timeout", oracleTimeout, fmt.Sprintf("http://%s:%d/", p.dst, p.port)}
	case "udp":
		return []string{"udp", "-timeout", oracleTimeout, fmt.Sprintf("%s:%d", p.dst, p.port), "oracle"}
	case "icmp":
		return []string{"ping", "-timeout", oracleTimeout, p.dst}
	}
	t.Fatalf("no real traffic for protocol %q", p.proto)
	return nil
}

// runWorkload runs the workload client through name (kubectl exec, or
// lab.sh exec) with env (nil: this process's) and reads its outcome: its
// exit code and its result line must agree.
func runWorkload(t testing.TB, p probe, env []string, name string, argv ...string) (outcome, time.Duration, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Env = env
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("real traffic %+v: %v", p, err)
	}
	got := outcome("")
	var took time.Duration
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, "result="); ok {
			line = l
			got = outcome(strings.Fields(rest)[0])
			for _, f := range strings.Fields(rest) {
				if v, ok := strings.CutPrefix(f, "time="); ok {
					took, _ = time.ParseDuration(v)
				}
			}
		}
	}
	want := map[outcome]int{served: 0, refused: 2, timedOut: 3}
	if c, ok := want[got]; !ok || c != code {
		t.Fatalf("real traffic %+v: exit %d with result %q: the workload client gave no outcome\n%s", p, code, got, out)
	}
	from := p.ns + "/" + p.pod
	if name != "kubectl" {
		from = "node " + argv[1]
	}
	t.Logf("real traffic %s -> %s %s:%d: %s", from, p.proto, p.dst, p.port, strings.TrimSpace(string(out)))
	return got, took, line
}

// terminalActions are the fates a trace record reports for its packet
// (in the order found); a true trace has exactly one.
func terminalActions(r traceRun) []report.Action {
	var out []report.Action
	if r.record == nil {
		return nil
	}
	for _, res := range r.record.Status.Results {
		for _, o := range res.Observations {
			switch o.Action {
			case report.ActionDelivered, report.ActionDropped, report.ActionRejected:
				if !slices.Contains(out, o.Action) {
					out = append(out, o.Action)
				}
			}
		}
	}
	return out
}

// verdictFor is the trace verdict real traffic calls for.
var verdictFor = map[outcome]report.Action{
	served:   report.ActionDelivered,
	refused:  report.ActionRejected,
	timedOut: report.ActionDropped,
}

// checkAgainstTraffic holds a finished trace to real traffic: the record's
// one fate must be the one real traffic met (served: Delivered, refused:
// Rejected, timed out: Dropped), and the exit code the one that fate gives
// under expect ("" for the default, delivered).
func checkAgainstTraffic(t testing.TB, r traceRun, real outcome, expect string) {
	t.Helper()
	want := verdictFor[real]
	if got := terminalActions(r); len(got) != 1 || got[0] != want {
		t.Errorf("real traffic was %s, so the trace must say %s; it says %v", real, want, got)
	}
	if expect == "" {
		expect = "delivered"
	}
	wantCode := 2
	if expect == "any" || strings.EqualFold(expect, string(want)) {
		wantCode = 0
	}
	if r.code != wantCode {
		t.Errorf("real traffic was %s (%s) and --expect %s: exit %d, want %d", real, want, expect, r.code, wantCode)
	}
}

// traceAndTraffic runs `kubectl traceflow` with args, then the same flow as
// real traffic, and checks one against the other. The trace goes first:
// the real connection's conntrack entry must not change the probe's path.
func traceAndTraffic(t testing.TB, p probe, expect string, args ...string) (traceRun, outcome) {
	t.Helper()
	if expect != "" {
		args = append(args, "--expect", expect)
	}
	r := runTrace(t, args...)
	real := realTraffic(t, p)
	checkAgainstTraffic(t, r, real, expect)
	return r, real
}

// protoArgs are the plugin's flags for a probe's protocol and port.
func protoArgs(p probe) []string {
	if p.proto == "icmp" {
		return []string{"--icmp"}
	}
	return []string{"--" + p.proto, strconv.Itoa(p.port)}
}

// probeOf is the real traffic a `check` case stands for: from its source
// pod to its destination (the endpoint's IP for an endpoint of
// --all-endpoints, a Service's ClusterIP, a pod's IP or the IP given) with
// the case's protocol and port, read from its -o json object.
func probeOf(t testing.TB, c checkCase) probe {
	t.Helper()
	ns, pod, ok := strings.Cut(c.Source, "/")
	if !ok {
		t.Fatalf("case %q: source %q is no pod", c.Case, c.Source)
	}
	p := probe{ns: ns, pod: pod}
	fields := strings.Fields(c.Packet)
	switch {
	case len(fields) >= 3 && (fields[0] == "TCP" || fields[0] == "UDP") && fields[1] == "port":
		p.proto = strings.ToLower(fields[0])
		port, err := strconv.Atoi(strings.TrimSuffix(fields[2], ","))
		if err != nil {
			t.Fatalf("case %q: packet %q: %v", c.Case, c.Packet, err)
		}
		p.port = port
	case strings.HasPrefix(c.Packet, "ICMP"):
		p.proto = "icmp"
	default:
		t.Fatalf("case %q: packet %q is none the workload speaks", c.Case, c.Packet)
	}
	_, ep, isEndpoint := strings.Cut(c.Case, "[endpoint ")
	dns, rest, _ := strings.Cut(c.Destination, "/")
	svc, isService := strings.CutPrefix(rest, "svc/")
	switch {
	case isEndpoint:
		host, _, _ := strings.Cut(strings.TrimSuffix(ep, "]"), ":")
		p.dst = host
	case isService:
		p.dst = strings.TrimSpace(mustKubectl(t, "get", "service", "-n", dns, svc, "-o", "jsonpath={.spec.clusterIP}"))
	case rest != "":
		p.dst = strings.TrimSpace(mustKubectl(t, "get", "pod", "-n", dns, rest, "-o", "jsonpath={.status.podIP}"))
	default:
		p.dst = c.Destination
	}
	return p
}

// checkCasesAgainstTraffic holds every case of a `check` run to its own
// real traffic: the verdict each reports must be the one its traffic
// calls for (checkAgainstTraffic's rule), whatever the case expected.
func checkCasesAgainstTraffic(t testing.TB, cases []checkCase) {
	t.Helper()
	for _, c := range cases {
		p := probeOf(t, c)
		real := realTraffic(t, p)
		if want := verdictFor[real]; c.Verdict != string(want) {
			t.Errorf("case %q: real traffic %s -> %s %s:%d was %s, so the verdict must be %s; it is %s", c.Case, c.Source, p.proto, p.dst, p.port, real, want, c.Verdict)
		}
	}
}
