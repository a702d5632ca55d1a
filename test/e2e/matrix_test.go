//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
)

// matrixCell is one object of `kubectl traceflow matrix -o json`.
type matrixCell struct {
	From, To, Port, State          string
	Verdict, Reply, Message        string
	Node, Table, Flow              string
	NetworkPolicy                  string
	Rule                           string `json:"networkPolicyRule"`
	Direction, Source, Destination string
	// Tag is the probe's (dscp.Tag).
	Tag uint8
}

type matrixRun struct {
	code           int
	stdout, stderr string
	cells          []matrixCell
}

// runMatrix runs `kubectl traceflow matrix ARGS`, decoding its cells when
// ARGS ask for -o json.
func runMatrix(t testing.TB, args ...string) matrixRun {
	t.Helper()
	full := append([]string{"traceflow", "matrix"}, args...)
	var r matrixRun
	r.stdout, r.stderr, r.code = runKubectl(context.Background(), t, "", full...)
	t.Logf("kubectl %s: exit %d\n%s%s", strings.Join(full, " "), r.code, r.stderr, r.stdout)
	if !slices.Contains(args, "json") {
		return r
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l == "" {
			continue
		}
		var c matrixCell
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("matrix -o json line %q: %v", l, err)
		}
		r.cells = append(r.cells, c)
	}
	return r
}

// matrixNamespace is the namespace of issue 27's matrix: client-1 and
// web-1 on the first node, web-2 on the second, a default deny of all
// ingress, and two allow rules: web from client on TCP 80, and client from
// web on TCP 81, where nothing listens (an allowed port that refuses).
// allowWeb is the first rule's peers, for the test that changes it.
func matrixNamespace(t testing.TB, ns, allowWeb string) {
	t.Helper()
	apply(t, podSpec(ns, "client-1", labNodes[0].name, map[string]string{"app": "client"})+
		podSpec(ns, "web-1", labNodes[0].name, map[string]string{"app": "web"})+
		podSpec(ns, "web-2", labNodes[1].name, map[string]string{"app": "web"})+
		denyIngress(ns, "deny-all", "")+
		matrixPolicies(ns, allowWeb))
}

// readyMatrixNamespace makes the matrix's namespace in ns, with web
// allowed from client, and waits until its pods run and its rules are in
// force; it returns the pods' addresses by name.
func readyMatrixNamespace(t testing.TB, ns string) map[string]string {
	t.Helper()
	matrixNamespace(t, ns, "from: [{podSelector: {matchLabels: {app: client}}}]")
	ips := podIPs(waitPods(t, ns, "client-1", "web-1", "web-2"))
	waitMatrixPolicies(t, ns, ips)
	return ips
}

func matrixPolicies(ns, allowWeb string) string {
	return netpol{ns: ns, name: "allow-web", app: "web", ingress: []string{tcpRule(allowWeb, 80)}}.yaml() +
		netpol{ns: ns, name: "allow-client", app: "client", ingress: []string{tcpRule("from: [{podSelector: {matchLabels: {app: web}}}]", 81)}}.yaml()
}

// stateFor is the cell state that real traffic's outcome calls for.
var stateFor = map[outcome]string{served: "delivered", refused: "refused", timedOut: "dropped"}

// Issue 27, done-when 2: the matrix of a namespace with a default deny and
// two allow rules, every cell equal to the workload's own real traffic
// between the same pods on the same port, every ✗ explained with its rule.
func TestMatrixAgreesWithRealTraffic(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "matrix")
	ips := readyMatrixNamespace(t, ns)
	r := runMatrix(t, "-n", ns, "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (every cell completed)", r.code)
	}
	// Ports from the policies that select the pods: TCP 80 and 81, the
	// pods declaring none. Three pods, two destinations each.
	if len(r.cells) != 12 {
		t.Fatalf("%d cells, want 12 (3 pods x 2 destinations x tcp/80, tcp/81)", len(r.cells))
	}
	real := realTrafficOfCells(t, ns, r.cells, ips)
	states := map[string]int{}
	for i, c := range r.cells {
		states[c.State]++
		if want := stateFor[real[i]]; c.State != want {
			t.Errorf("cell %s -> %s %s: real traffic %s, so the cell must be %s; it is %s (%s)", c.From, c.To, c.Port, real[i], want, c.State, c.Message)
		}
		if c.State == "dropped" && (c.NetworkPolicy == "" || c.Node == "" || c.Table == "") {
			t.Errorf("cell %s -> %s %s dropped without its node, table and NetworkPolicy: %+v", c.From, c.To, c.Port, c)
		}
	}
	// The namespace holds each kind of cell: the test is not all one colour.
	if states["delivered"] != 2 || states["refused"] != 2 || states["dropped"] != 8 {
		t.Errorf("cells by state %v, want 2 delivered (client to web on 80), 2 refused (web to client on 81), 8 dropped", states)
	}
	// The run's traces shared DSCP values, told apart by ECN (four round
	// trips at once on three), each cell still equal to real traffic.
	tags, shared := map[string]int{}, 0
	for _, c := range r.cells {
		tags[dscp.Name(c.Tag)]++
		shared += min(int(dscp.ECN(c.Tag)), 1)
	}
	if t.Logf("the cells' probe tags: %v", tags); shared == 0 {
		t.Errorf("no cell's probe carried an ECN variant of its DSCP value (tags %v): the run's traces shared none", tags)
	}
	assertNothingLeft(t)
}

// Two matrices of one namespace at once while another plugin holds 10 of
// the pool's 14 DSCP values (Leases the test makes): the 4 left, 12 tags,
// cannot hold both runs' four round trips at once (16 tags), so cells of
// one find every tag taken. Each cell of both must complete and equal real
// traffic: a cell that found no tag runs again at its run's end, on the
// run's own tags or, where its run holds too few, once the other run's
// come free (before, such cells failed with exit 4); and no two traces
// ever share a tag.
func TestMatricesAtOnceAgreeWithRealTraffic(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "matrix-twice")
	ips := readyMatrixNamespace(t, ns)
	release := holdOtherTags(t, dscp.Pool()[4:])
	runs := make([]matrixRun, 2)
	t.Run("at once", func(t *testing.T) {
		for i := range runs {
			t.Run(fmt.Sprint(i+1), func(t *testing.T) {
				t.Parallel()
				runs[i] = runMatrix(t, "-n", ns, "-o", "json")
			})
		}
	})
	for i, r := range runs {
		if r.code != 0 || len(r.cells) != 12 {
			t.Fatalf("matrix %d: exit %d with %d cells, want 0 with 12 (every cell completed)", i+1, r.code, len(r.cells))
		}
	}
	real := realTrafficOfCells(t, ns, runs[0].cells, ips)
	want := map[string]string{}
	for i, c := range runs[0].cells {
		want[c.From+" "+c.To+" "+c.Port] = stateFor[real[i]]
	}
	for i, r := range runs {
		for _, c := range r.cells {
			if w := want[c.From+" "+c.To+" "+c.Port]; c.State != w {
				t.Errorf("matrix %d, cell %s -> %s %s: real traffic says %s; it is %s (%s)", i+1, c.From, c.To, c.Port, w, c.State, c.Message)
			}
		}
	}
	release()
	assertNothingLeft(t)
}

// waitMatrixPolicies waits until the dataplane enforces each of the
// matrix's rules on each node it applies on: the cells are traced once,
// and their real traffic is sent after, so a rule still on its way when
// the matrix runs would show as a disagreement. Each want is a source,
// a destination's address and port, and the real outcome.
func waitMatrixPolicies(t testing.TB, ns string, ips map[string]string) {
	t.Helper()
	waitRealTraffic(t, ns, []matrixWant{
		{"client-1", "web-1", 80, served}, {"client-1", "web-2", 80, served}, // allow-web, both nodes
		{"web-1", "web-2", 80, timedOut}, {"web-2", "client-1", 80, timedOut}, // deny-all, both nodes
		{"web-2", "client-1", 81, refused}, // allow-client: allowed, nothing listens
	}, ips)
}

// matrixWant is one flow of real traffic and the outcome it must meet.
type matrixWant struct {
	from, to string
	port     int
	want     outcome
}

// waitRealTraffic waits until every flow of wants meets its outcome.
func waitRealTraffic(t testing.TB, ns string, wants []matrixWant, ips map[string]string) {
	t.Helper()
	eventually(t, 60*time.Second, "the matrix's policies in force on both nodes", func() error {
		for _, w := range wants {
			out, _ := execIn(ns, w.from, "get", "-timeout", "1s", fmt.Sprintf("http://%s:%d/", ips[w.to], w.port))
			if !strings.Contains(out, "result="+string(w.want)+" ") {
				return fmt.Errorf("%s -> %s:%d wants %s, got %q", w.from, w.to, w.port, w.want, strings.TrimSpace(out))
			}
		}
		return nil
	})
}

// realTrafficOfCells is the real traffic of every cell, sent from its
// source pod to its destination's address and port, a few at a time (a
// dropped cell waits for the client's timeout).
func realTrafficOfCells(t *testing.T, ns string, cells []matrixCell, ips map[string]string) []outcome {
	t.Helper()
	out := make([]outcome, len(cells))
	var mu sync.Mutex
	t.Run("real traffic", func(t *testing.T) {
		for i, c := range cells {
			proto, port, ok := strings.Cut(c.Port, "/")
			n := 0
			if _, err := fmt.Sscan(port, &n); !ok || err != nil {
				t.Fatalf("cell port %q", c.Port)
			}
			t.Run(fmt.Sprintf("%s-%s-%s", c.From, c.To, port), func(t *testing.T) {
				t.Parallel()
				got := realTraffic(t, probe{ns: ns, pod: c.From, proto: proto, dst: ips[c.To], port: n})
				mu.Lock()
				out[i] = got
				mu.Unlock()
			})
		}
	})
	return out
}

// Issue 27, done-when 3 and 4: a matrix written with -o expected passes
// against itself; after one policy changes, exactly the cells it affects
// differ (exit 2), and the JUnit report names each with the rule that
// decided it. Bad input exits 1 naming what to fix, with nothing created.
func TestMatrixExpectedFile(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "matrix-expect")
	fromClient := "from: [{podSelector: {matchLabels: {app: client}}}]"
	matrixNamespace(t, ns, fromClient)
	ips := podIPs(waitPods(t, ns, "client-1", "web-1", "web-2"))
	waitMatrixPolicies(t, ns, ips)
	dir := t.TempDir()
	file := filepath.Join(dir, "matrix.yaml")
	ports := []string{"-n", ns, "--port", "tcp/80", "--port", "tcp/81"}
	r := runMatrix(t, append(ports, "-o", "expected")...)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	if err := os.WriteFile(file, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runMatrix(t, append(ports, "--expect-file", file)...); r.code != 0 {
		t.Fatalf("the matrix against its own expected file: exit %d, want 0", r.code)
	}
	// web-2 now takes TCP 80 from web pods only: client-1's two cells to
	// the web pods on 80 turn red, and nothing else.
	apply(t, matrixPolicies(ns, "from: [{podSelector: {matchLabels: {app: nobody}}}]"))
	waitRealTraffic(t, ns, []matrixWant{{"client-1", "web-1", 80, timedOut}, {"client-1", "web-2", 80, timedOut}}, ips)
	report := filepath.Join(dir, "matrix.xml")
	r = runMatrix(t, append(ports, "--expect-file", file, "--junit", report)...)
	if r.code != 2 {
		t.Fatalf("exit %d, want 2 (cells differ)", r.code)
	}
	var diffs []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if rest, ok := strings.CutPrefix(l, "DIFF "); ok {
			cell, _, _ := strings.Cut(rest, ":")
			diffs = append(diffs, cell)
		}
	}
	slices.Sort(diffs)
	if want := []string{"client-1 → web-1 tcp/80", "client-1 → web-2 tcp/80"}; !slices.Equal(diffs, want) {
		t.Errorf("cells that differ: %q, want exactly %q", diffs, want)
	}
	xml := validateJUnit(t, report)
	if !strings.Contains(xml, `tests="12" failures="2" errors="0"`) {
		t.Errorf("JUnit counts wrong:\n%s", xml)
	}
	for _, want := range []string{"client-1 → web-2 tcp/80: expected delivered", "got dropped", "NetworkPolicy " + ns + "/"} {
		if !strings.Contains(xml, want) {
			t.Errorf("the JUnit report does not say %q:\n%s", want, xml)
		}
	}
	matrixBadInput(t, ns, dir)
	assertNothingLeft(t)
}

// matrixBadInput: each bad input exits 1 with a message naming what to
// fix, and creates no helper pod.
func matrixBadInput(t *testing.T, ns, dir string) {
	t.Helper()
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	head := "apiVersion: traceflow.kubectl-traceflow.io/v1alpha1\nkind: ConnectivityMatrix\ncells:\n"
	broken := write("broken.yaml", head+"- {from: client-1, to: web-1, port: tcp/80, expect: delivered\n")
	ghost := write("ghost.yaml", head+"- {from: client-1, to: web-1, port: tcp/80, expect: delivered}\n- {from: ghost, to: web-1, port: tcp/80, expect: dropped}\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"selector matching no pod", []string{"-l", "app=ghost"}, "selector app=ghost: 0 Ready pods"},
		{"a port that is not a port", []string{"--port", "tcp/65536"}, `--port "tcp/65536"`},
		{"an expected file that does not parse", []string{"--expect-file", broken}, broken + ":"},
		{"an expected file naming a pod that does not exist", []string{"--expect-file", ghost}, ghost + ":5: cells[1].from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := helperPods(t)
			r := runMatrix(t, append([]string{"-n", ns}, tc.args...)...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.want)
			}
			if helperPods(t) != before {
				t.Errorf("bad input created helper pods")
			}
		})
	}
}

// Issue 27, done-when 5: SIGINT in the middle of a matrix leaves no
// helper pod, tag claim or record, and no flow once the timeout passed.
func TestMatrixInterruptLeavesNothing(t *testing.T) {
	requireLab(t)
	const timeout = 5 * time.Second
	ns := namespace(t, "matrix-int")
	matrixNamespace(t, ns, "from: [{podSelector: {matchLabels: {app: client}}}]")
	waitPods(t, ns, "client-1", "web-1", "web-2")
	// 36 cells one at a time (a round trip holds two tags): interrupted
	// once the first cell has ended, the matrix is far from its end.
	args := []string{"traceflow", "matrix", "-n", ns, "-o", "json", "--timeout", timeout.String(), "--parallel", "2"}
	for _, p := range []string{"80", "81", "82", "83", "84", "85"} {
		args = append(args, "--port", p)
	}
	cmd := exec.Command("kubectl", args...)
	cmd.Env = kubectlEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		_ = cmd.Wait()
		t.Fatalf("the matrix ended before its first cell: %s", errb.String())
	}
	first := lines.Text()
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	n := 1
	for lines.Scan() {
		n++
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("an interrupted matrix exited %v, want 3 (did not complete)\n%s", err, errb.String())
	}
	t.Logf("interrupted matrix after %d of 36 cells (first %s): exit %v\n%s", n, first, err, errb.String())
	if p := helperPods(t); p != "" {
		t.Errorf("the plugin exited after SIGINT with helper pods still there: %s", p)
	}
	flowsGoneBy(t, start, timeout)
	assertNothingLeft(t)
}
