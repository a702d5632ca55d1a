//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// checkCase is one object of `kubectl traceflow check -o json`.
type checkCase struct {
	Case, File, Verdict, Reply, Message, Node, Table, NetworkPolicy, Trace string
	Source, Destination, Packet                                            string
	Line, ExitCode                                                         int
	Passed                                                                 bool
	Tag                                                                    uint8
}

type checkRun struct {
	code           int
	stdout, stderr string
	cases          []checkCase
}

// runCheck runs `kubectl traceflow check ARGS -o json` and decodes its
// objects, remembering every trace as this run's.
func runCheck(t testing.TB, stdin string, args ...string) checkRun {
	t.Helper()
	full := append([]string{"traceflow", "check", "-o", "json"}, args...)
	var r checkRun
	r.stdout, r.stderr, r.code = runKubectl(context.Background(), t, stdin, full...)
	r.cases = decodeCheck(t, r.stdout)
	t.Logf("kubectl %s: exit %d\n%s%s", strings.Join(full, " "), r.code, r.stderr, r.stdout)
	return r
}

func decodeCheck(t testing.TB, stdout string) []checkCase {
	t.Helper()
	var cases []checkCase
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var c checkCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("-o json line is not an object: %v\n%s", err, sc.Text())
		}
		rememberTrace(c.Trace, c.Tag)
		cases = append(cases, c)
	}
	return cases
}

func rememberTrace(name string, tag uint8) {
	if name == "" {
		return
	}
	ours.Lock()
	defer ours.Unlock()
	ours.names[name] = true
	if tag != 0 {
		ours.tags[tag] = true
	}
}

// smokeSuite is the 25-case (27-trace) suite of issue 16 over the trace fixture: a
// and c on node 1, b and locked on node 2, Service web in front of b, and
// deny-locked denying all ingress to locked. Each expectation is one the
// trace tests (trace_test.go) check against real traffic between the same
// pods.
func smokeSuite(f *traceFixture) string {
	b, c := f.pods["b"].Status.PodIP, f.pods["c"].Status.PodIP
	return fmt.Sprintf(`apiVersion: %s
kind: %s
defaults:
  namespace: %s
  timeout: 20s
cases:
- {name: a to c TCP 80 (same node), from: {pod: a}, to: {pod: c}, port: 80}
- {name: a to c TCP 8080 (same node), from: {pod: a}, to: {pod: c}, port: 8080}
- {name: a to c UDP (same node), from: {pod: a}, to: {pod: c}, protocol: UDP, port: 5000}
- {name: a to c ICMP (same node), from: {pod: a}, to: {pod: c}, protocol: ICMP}
- {name: a to b TCP 80 (across nodes), from: {pod: a}, to: {pod: b}, port: 80}
- {name: a to b TCP 8080 (across nodes), from: {pod: a}, to: {pod: b}, port: 8080}
- {name: a to b UDP (across nodes), from: {pod: a}, to: {pod: b}, protocol: UDP, port: 5000}
- {name: a to b ICMP (across nodes), from: {pod: a}, to: {pod: b}}
- {name: c to b TCP 80, from: {pod: c}, to: {pod: b}, port: 80}
- {name: b to a TCP 80 (back), from: {pod: b}, to: {pod: a}, port: 80}
- {name: b to c ICMP (back), from: {pod: b}, to: {pod: c}}
- {name: c to a UDP, from: {pod: c}, to: {pod: a}, protocol: UDP, port: 5000}
- {name: a to Service web (first port), from: {pod: a}, to: {service: web}}
- {name: c to Service web port 80, from: {pod: c}, to: {service: web}, port: 80}
- {name: b to its own Service (hairpin), from: {pod: b}, to: {service: web}, port: 80}
- {name: a to every endpoint of web, from: {pod: a}, to: {service: web, allEndpoints: true}, port: 80}
- {name: a to b's IP, from: {pod: a}, to: {ip: %s}, port: 80}
- {name: a to c's IP ICMP, from: {pod: a}, to: {ip: %s}}
- {name: c to b's IP UDP, from: {pod: c}, to: {ip: %s}, protocol: UDP, port: 5000}
- {name: a cannot reach locked, from: {pod: a}, to: {pod: locked}, port: 80, expect: dropped}
- {name: a cannot reach locked on 8080, from: {pod: a}, to: {pod: locked}, port: 8080, expect: dropped}
- {name: c cannot ping locked, from: {pod: c}, to: {pod: locked}, protocol: ICMP, expect: dropped}
- {name: b cannot reach locked (same node), from: {pod: b}, to: {pod: locked}, protocol: UDP, port: 5000, expect: dropped}
- {name: client to web by labels, from: {selector: app=client}, to: {selector: app=web}, port: 80}
- {name: client and peer reach b, from: {selector: 'app in (client,peer)', pods: all}, to: {pod: b}, protocol: ICMP}
`, check.APIVersion, check.Kind, f.ns, b, c, b)
}

// Issue 16, done-when 1 (and 4 for a suite that ends): 25 cases, 27
// traces, all meeting their expectation; the JUnit report validates
// against Jenkins' schema; nothing is left.
func TestCheckSuitePasses(t *testing.T) {
	f := getTraceFixture(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "smoke.yaml")
	if err := os.WriteFile(file, []byte(smokeSuite(f)), 0o600); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.xml")
	pods, records := watchHelperPods(t), watchRecords(t)
	start := time.Now()
	r := runCheck(t, "", "-f", file, "--junit", report)
	t.Logf("25 cases, %d traces in %s", len(r.cases), time.Since(start).Round(time.Millisecond))
	// One shared helper per node served all 27 traces.
	if created := pods(); len(created) != len(labNodes) {
		t.Errorf("helper pods created: %v, want one per node (%d)", created, len(labNodes))
	}
	// Nobody reads a suite's records: they stay in the plugin, sparing the
	// API server a create, a status write per hop and a delete per trace.
	if created := records(); len(created) != 0 {
		t.Errorf("trace records created: %v, want none (a suite keeps none)", created)
	}
	if r.code != 0 {
		t.Errorf("exit %d, want 0", r.code)
	}
	if len(r.cases) != 27 {
		t.Errorf("%d traces reported, want 27 (25 cases; allEndpoints adds 1, pods: all 1)", len(r.cases))
	}
	for _, c := range r.cases {
		if !c.Passed || c.ExitCode != 0 {
			t.Errorf("%q: %s, exit %d: %s", c.Case, c.Verdict, c.ExitCode, c.Message)
		}
	}
	if !strings.Contains(r.stderr, "PASS: 27 of 27 traces") {
		t.Errorf("no summary line on stderr: %q", r.stderr)
	}
	xml := validateJUnit(t, report)
	if !strings.Contains(xml, `tests="27" failures="0" errors="0"`) {
		t.Errorf("JUnit counts wrong:\n%s", xml)
	}
	checkCasesAgainstTraffic(t, r.cases)
	assertNothingLeft(t)
}

// watchHelperPods watches the creation of helper pods from now on; the
// returned func stops the watch and lists the pods created, by
// namespace/name.
func watchHelperPods(t testing.TB) func() []string {
	t.Helper()
	return watchCreated(t, corev1.SchemeGroupVersion.WithResource("pods"))
}

// watchRecords watches the creation of trace records (Traceflow objects
// the plugin labels as its own) from now on, as watchHelperPods does pods.
func watchRecords(t testing.TB) func() []string {
	t.Helper()
	return watchCreated(t, traceflow.GroupVersionResource)
}

// watchCreated watches the creation of the plugin's objects of one
// resource, in every namespace, from now on; the returned func stops the
// watch and lists the objects created, by namespace/name. The watch starts
// at a list's resourceVersion: one without would first report every
// object there already (the demo's kept record) as added.
func watchCreated(t testing.TB, res schema.GroupVersionResource) func() []string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir(), "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	client := dynamic.NewForConfigOrDie(cfg).Resource(res)
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: labels.Selector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w, err := client.Watch(ctx, metav1.ListOptions{LabelSelector: labels.Selector, ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			if o, ok := e.Object.(*unstructured.Unstructured); ok && e.Type == watch.Added {
				seen[o.GetNamespace()+"/"+o.GetName()] = true
			}
		}
	}()
	return func() []string {
		cancel()
		w.Stop()
		<-done
		return slices.Sorted(maps.Keys(seen))
	}
}

// validateJUnit checks file against the Jenkins JUnit schema kept in the
// repository, with xmllint, and returns it.
func validateJUnit(t testing.TB, file string) string {
	t.Helper()
	xsd := filepath.Join(repoRoot(), "pkg", "plugin", "junit", "testdata", "jenkins-junit-10.xsd")
	out, err := exec.Command("xmllint", "--noout", "--schema", xsd, file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "validates") {
		t.Fatalf("xmllint --schema %s %s: %v\n%s", xsd, file, err, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// One case deliberately wrong: exit 2, and a JUnit failure that names the
// node, the table and the policy that dropped the probe.
func TestCheckWrongExpectationFails(t *testing.T) {
	f := getTraceFixture(t)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.xml")
	r := runCheck(t, fmt.Sprintf(`apiVersion: %s
kind: %s
defaults: {namespace: %s}
cases:
- {name: a reaches b, from: {pod: a}, to: {pod: b}, port: 80}
- {name: a reaches locked (wrong), from: {pod: a}, to: {pod: locked}, port: 80}
`, check.APIVersion, check.Kind, f.ns), "-f", "-", "--junit", report)
	if r.code != 2 {
		t.Fatalf("exit %d, want 2", r.code)
	}
	if len(r.cases) != 2 || !r.cases[0].Passed && r.cases[0].Case == "a reaches b" {
		t.Fatalf("want 2 results, the first passing: %+v", r.cases)
	}
	xml := validateJUnit(t, report)
	t.Logf("JUnit report:\n%s", xml)
	if !strings.Contains(xml, `tests="2" failures="1" errors="0"`) {
		t.Errorf("JUnit counts wrong:\n%s", xml)
	}
	_, failure, ok := strings.Cut(xml, `<failure type="Dropped" message="`)
	if !ok {
		t.Fatalf("no Dropped failure in the report:\n%s", xml)
	}
	msg, _, _ := strings.Cut(failure, `"`)
	for _, want := range []string{"expected delivered", "on " + labNodes[1].name, "by table IngressDefaultRule", "NetworkPolicy " + f.ns + "/deny-locked", "flow "} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure's message does not say %q: %s", want, msg)
		}
	}
	checkCasesAgainstTraffic(t, r.cases)
	assertNothingLeft(t)
}

// Issue 16, done-when 2: bad suite files exit 1, name file:line and the
// field, and create nothing.
func TestCheckBadSuitesCreateNothing(t *testing.T) {
	f := getTraceFixture(t)
	head := fmt.Sprintf("apiVersion: %s\nkind: %s\ndefaults: {namespace: %s}\ncases:\n", check.APIVersion, check.Kind, f.ns)
	good := "- {name: fine, from: {pod: a}, to: {pod: b}, port: 80}\n"
	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", good + "- {name: odd, from: {pod: a}, to: {pod: b}, port: 80, colour: red}\n", `:6: cases[1].colour (case "odd"): unknown field`},
		{"missing to", good + "- {name: nowhere, from: {pod: a}, port: 80}\n", `:6: cases[1].to (case "nowhere"): missing`},
		{"bad port", good + "- {name: big, from: {pod: a}, to: {pod: b}, port: 65536}\n", `:6: cases[1].port (case "big"): 65536 is not a port`},
		{"selector matching no pod", good + "- {name: ghost, from: {selector: app=ghost}, to: {pod: b}}\n", `:6: cases[1].from.selector (case "ghost"): selector app=ghost matches no Ready pod`},
		{"duplicate names", good + good, `:6: cases[1].name: "fine" is already the name of the case at line 5`},
		{"YAML syntax error", good + "- {name: broken, from: {pod: a, to: {pod: b}\n", `:6: YAML syntax`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := helperPods(t)
			file := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(file, []byte(head+tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			r := runCheck(t, "", "-f", file)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1", r.code)
			}
			if want := "error: " + file + tc.want; !strings.HasPrefix(r.stderr, want) {
				t.Errorf("stderr %q\nwant it to start %q", r.stderr, want)
			}
			if len(r.cases) != 0 || helperPods(t) != before {
				t.Errorf("a bad suite ran traces: %+v", r.cases)
			}
			assertNothingLeft(t)
		})
	}
}

// Issue 16, done-when 4: SIGINT in the middle of a suite leaves no helper
// pod, tag claim or record, and no flow once the traces' timeout passed.
func TestCheckInterruptLeavesNothing(t *testing.T) {
	const timeout = 5 * time.Second
	file := shortSuiteFile(t, timeout)
	cmd := exec.Command("kubectl", "traceflow", "check", "-o", "json", "-f", file)
	cmd.Env = kubectlEnv()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once helper pods exist: traces are mid-way.
	waitHelperPods(t)
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("an interrupted suite exited %v, want 3 (did not complete)\n%s", err, errb.String())
	}
	cases := decodeCheck(t, out.String())
	t.Logf("interrupted after %d of 27 traces reported; exit %v\n%s%s", len(cases), err, errb.String(), out.String())
	// By the time the plugin has exited, it has deleted its helper pods.
	if p := helperPods(t); p != "" {
		t.Errorf("the plugin exited after SIGINT with helper pods still there: %s", p)
	}
	// A helper container the kubelet was still starting when its pod was
	// deleted can run long enough to install flows, and is then killed
	// without removing them: the promise for those is their hard timeout,
	// the trace's. So the check is made past that horizon, not at the first
	// moment nothing happens to be there.
	flowsGoneBy(t, start, timeout)
	assertNothingLeft(t)
}

// shortSuiteFile writes the smoke suite with every trace's timeout set to
// timeout, for the tests that interrupt it.
func shortSuiteFile(t testing.TB, timeout time.Duration) string {
	t.Helper()
	f := getTraceFixture(t)
	file := filepath.Join(t.TempDir(), "smoke.yaml")
	body := strings.Replace(smokeSuite(f), "timeout: 20s", "timeout: "+timeout.String(), 1)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// waitHelperPods waits for a suite's helper pods to exist: its traces are
// under way.
func waitHelperPods(t testing.TB) {
	t.Helper()
	eventually(t, 60*time.Second, "helper pods of the suite", func() error {
		if helperPods(t) == "" {
			return errors.New("none yet")
		}
		return nil
	})
}

// flowsGoneBy checks the promise a trace makes for flows that a helper
// installed after its pod was deleted (a container the kubelet was still
// starting can run long enough to install them, and is then killed without
// removing them): each carries a hard timeout no longer than the trace's,
// so OVS removes it by itself. The flows seen on the nodes must carry one,
// and must then go; the wait for that is bounded only so that a leak ends
// the test (a minute past the timeout), not to time OVS.
func flowsGoneBy(t testing.TB, start time.Time, timeout time.Duration) {
	t.Helper()
	for _, n := range labNodes {
		for _, l := range strings.Split(traceFlows(t, n.name), "\n") {
			if l == "" {
				continue
			}
			_, rest, ok := strings.Cut(l, "hard_timeout=")
			value, _, _ := strings.Cut(rest, ",")
			secs, err := strconv.Atoi(strings.TrimSpace(value))
			if !ok || err != nil || time.Duration(secs)*time.Second > timeout {
				t.Errorf("a trace flow on %s without a hard timeout within the trace's %s:\n%s", n.name, timeout, l)
			}
		}
	}
	eventually(t, time.Until(start.Add(timeout))+time.Minute, "helpers gone and trace flows expired", func() error {
		return helpersAndFlowsGone(t)
	})
}

// --all-endpoints on the single-trace command: one trace through the
// Service and one to each endpoint, each reported.
func TestTraceAllEndpoints(t *testing.T) {
	f := getTraceFixture(t)
	cmd := exec.Command("kubectl", "traceflow", "-n", f.ns, "a", "svc/web", "--tcp", "80", "--all-endpoints", "-o", "json")
	cmd.Env = kubectlEnv()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("exit %v, want 0\n%s%s", err, errb.String(), out.String())
	}
	cases := decodeCheck(t, out.String())
	t.Logf("%s%s", errb.String(), out.String())
	// One object per trace as it ends, so in either order.
	b := f.pods["b"].Status.PodIP
	var service, endpoint int
	for _, c := range cases {
		switch {
		case strings.HasSuffix(c.Case, "[endpoint "+b+":80]"):
			endpoint++
		case strings.HasSuffix(c.Case, "svc/web"):
			service++
		}
	}
	if len(cases) != 2 || service != 1 || endpoint != 1 {
		t.Fatalf("want the Service and endpoint %s:80, got %+v", b, cases)
	}
	for _, c := range cases {
		if !c.Passed || c.Verdict != "Delivered" {
			t.Errorf("%q: %s: %s", c.Case, c.Verdict, c.Message)
		}
	}
	checkCasesAgainstTraffic(t, cases)
	assertNothingLeft(t)
}

// Issue 16, done-when 4, the hard way: a second Ctrl-C exits at once, and
// the cleanup it starts in the background removes every running trace's
// claim and record and the run's shared helpers, not only the last trace
// registered.
func TestCheckSecondInterruptCleansUp(t *testing.T) {
	const timeout = 5 * time.Second
	file := shortSuiteFile(t, timeout)
	// Records are told apart by their creation (the lab's API server runs
	// on this machine's clock): an earlier test's killed trace leaves an
	// unfinished record for `cleanup` to remove once stale, by design.
	begin := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
	cmd := exec.Command("kubectl", "traceflow", "check", "-o", "json", "-f", file)
	cmd.Env = kubectlEnv()
	var errb strings.Builder
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	waitHelperPods(t)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// The second signal goes once the first is seen to have acted (two
	// sent back to back may arrive as one): the traces not started yet
	// report at once, while the running ones are still stopping.
	select {
	case l := <-lines:
		rememberTrace(decodeCheck(t, l)[0].Trace, 0)
	case <-time.After(10 * time.Second):
		t.Fatal("no trace reported within 10 s of the first Ctrl-C")
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatalf("second Ctrl-C: %v (the plugin had already exited)", err)
	}
	start := time.Now()
	t.Logf("second Ctrl-C at %s", start.UTC().Format(time.RFC3339Nano))
	for l := range lines {
		for _, c := range decodeCheck(t, l) {
			t.Logf("%s: %s (%s)", c.Trace, c.Verdict, c.Message)
		}
	}
	err = cmd.Wait()
	// At once: it hands the deletions to a background cleanup and says so
	// (checked below), rather than waiting for them.
	t.Logf("the plugin exited %s after a second Ctrl-C", time.Since(start).Round(time.Millisecond))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("exit %v, want 3\n%s", err, errb.String())
	}
	t.Logf("stderr:\n%s", errb.String())
	if !strings.Contains(errb.String(), "in the background") {
		t.Errorf("no word of the background cleanup:\n%s", errb.String())
	}
	eventually(t, 15*time.Second, "helper pods, claims and records removed after a second Ctrl-C", func() error {
		if p := helperPods(t); p != "" {
			return fmt.Errorf("pods still there: %s", p)
		}
		if l := strings.TrimSpace(mustKubectl(t, "get", "leases", "-A", "-l="+labels.Selector, "-o", "name")); l != "" {
			return fmt.Errorf("claims: %s", l)
		}
		// Every record this run made, not only those of the traces that
		// reported: a trace stopped between its verdict and its record's
		// deletion leaves a finished record for the background cleanup.
		var left []string
		for _, l := range strings.Split(strings.TrimSpace(mustKubectl(t, "get", "traceflows.crd.antrea.io", "-l="+labels.Selector,
			"-o", "custom-columns=NAME:.metadata.name,CREATED:.metadata.creationTimestamp,PHASE:.status.phase", "--no-headers")), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			if created, err := time.Parse(time.RFC3339, f[1]); err == nil && !created.Before(begin) {
				left = append(left, l)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("records:\n%s", strings.Join(left, "\n"))
		}
		return nil
	})
	flowsGoneBy(t, start, timeout)
	assertNothingLeft(t)
}
