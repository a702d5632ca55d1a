package cli

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
)

const suiteHead = "apiVersion: " + check.APIVersion + "\nkind: " + check.Kind + "\n"

func writeSuite(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bad suites exit 1 naming file:line and the field, and create nothing;
// problems the file alone shows need no cluster at all.
func TestCheckBadSuiteCreatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		// connects: the problem shows only against the cluster.
		connects bool
	}{
		{"unknown field", suiteHead + "cases:\n- name: a\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n  colour: red\n",
			`s.yaml:7: cases[0].colour (case "a"): unknown field`, false},
		{"missing to", suiteHead + "cases:\n- name: a\n  from: {pod: pod-a}\n",
			`s.yaml:4: cases[0].to (case "a"): missing`, false},
		{"bad port", suiteHead + "cases:\n- name: a\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n  port: 0\n",
			`s.yaml:7: cases[0].port (case "a"): 0 is not a port`, false},
		{"duplicate names", suiteHead + "cases:\n- name: a\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n- name: a\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n",
			`s.yaml:7: cases[1].name: "a" is already the name of the case at line 4`, false},
		{"YAML syntax", suiteHead + "cases:\n- name: a\n  from: [pod: pod-a\n",
			`s.yaml:5: YAML syntax`, false},
		{"selector matching no pod", suiteHead + "cases:\n- name: a\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n- name: b\n  from: {selector: app=nothing}\n  to: {pod: pod-b}\n",
			`s.yaml:8: cases[1].from.selector (case "b"): selector app=nothing matches no Ready pod in namespace default`, true},
		{"missing pod, after a good case", suiteHead + "cases:\n- name: a\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n- name: b\n  from: {pod: pod-a}\n  to: {pod: nope}\n",
			`s.yaml:7: cases[1] (case "b"): destination pod default/nope not found`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := writeSuite(t, t.TempDir(), "s.yaml", tc.body)
			r := runCommand(t, []string{"check", "-f", f}, demoCluster()...)
			if exitcode.Of(r.err) != exitcode.Usage {
				t.Fatalf("exit %d (%v), want 1", exitcode.Of(r.err), r.err)
			}
			if msg := strings.TrimPrefix(r.err.Error(), filepath.Dir(f)+"/"); !strings.HasPrefix(msg, tc.want) {
				t.Errorf("error %q\nwant it to start %q", msg, tc.want)
			}
			if r.connected != tc.connects {
				t.Errorf("connected to the cluster: %v, want %v", r.connected, tc.connects)
			}
			if w := r.writes(); len(w) > 0 {
				t.Errorf("a bad suite wrote to the cluster: %v", w)
			}
		})
	}
}

func TestCheckFlags(t *testing.T) {
	dir := t.TempDir()
	good := writeSuite(t, dir, "good.yaml", suiteHead+"cases:\n- name: a\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"check"}, "no suite: give -f FILE"},
		{"missing file", []string{"check", "-f", filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"empty directory", []string{"check", "-f", t.TempDir()}, "holds no *.yaml"},
		{"parallel too high", []string{"check", "-f", good, "--parallel", "43"}, "--parallel 43: give 1 to 42"},
		{"junit into a missing directory", []string{"check", "-f", good, "--junit", filepath.Join(dir, "no", "r.xml")}, "does not exist"},
		{"stdin twice", []string{"check", "-f", "-", "-f", "-"}, "given twice"},
		{"an argument", []string{"check", "pod-a"}, "takes no arguments"},
		{"bad output", []string{"check", "-f", good, "-o", "yaml"}, "yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCommand(t, tc.args, demoCluster()...)
			if exitcode.Of(r.err) != exitcode.Usage || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("got exit %d %v, want 1 saying %q", exitcode.Of(r.err), r.err, tc.want)
			}
			if r.connected {
				t.Error("a usage error connected to the cluster")
			}
		})
	}
}

// A directory stands for its suite files, in name order; a bad one among
// them is named.
func TestCheckDirectoryNamesTheBadFile(t *testing.T) {
	dir := t.TempDir()
	writeSuite(t, dir, "a.yaml", suiteHead+"cases:\n- name: a\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n")
	writeSuite(t, dir, "b.yml", suiteHead+"cases:\n- name: b\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n  expect: maybe\n")
	writeSuite(t, dir, "notes.txt", "not a suite")
	r := runCommand(t, []string{"check", "-f", dir})
	want := filepath.Join(dir, "b.yml") + `:7: cases[0].expect (case "b")`
	if exitcode.Of(r.err) != exitcode.Usage || !strings.HasPrefix(r.err.Error(), want) {
		t.Fatalf("got %v, want exit 1 starting %q", r.err, want)
	}
}

// --engine agent follows the probe one way only: a suite with a round
// trip exits 1 naming the roundTrip's line, before the cluster is asked.
func TestCheckRoundTripWithTheAgentEngine(t *testing.T) {
	dir := t.TempDir()
	f := writeSuite(t, dir, "rt.yaml", suiteHead+"cases:\n- name: one way\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n"+
		"- name: and back\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n  roundTrip: true\n")
	r := runCommand(t, []string{"check", "-f", f, "--engine", "agent"}, demoCluster()...)
	want := f + `:10: cases[1].roundTrip (case "and back"): --engine agent: Antrea's Traceflow follows the probe one way only`
	if exitcode.Of(r.err) != exitcode.Usage || !strings.HasPrefix(r.err.Error(), want) {
		t.Fatalf("got exit %d %v, want 1 starting %q", exitcode.Of(r.err), r.err, want)
	}
	if r.connected {
		t.Error("a usage error connected to the cluster")
	}
}

// --engine agent starts a probe only at a pod's own port: a suite with a
// node or an outside source exits 1 naming that source's line, before the
// cluster is asked, as the single trace refuses SRC node/NAME or ADDR.
func TestCheckNodeOrOutsideSourceWithTheAgentEngine(t *testing.T) {
	for _, tc := range []struct{ name, from, field string }{
		{"a node", "{node: node-1}", "from.node"},
		{"outside", "{ip: 203.0.113.7}", "from.ip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := writeSuite(t, t.TempDir(), "s.yaml", suiteHead+"cases:\n- name: pod\n  from: {pod: pod-a}\n  to: {pod: pod-b}\n"+
				"- name: beyond\n  from: "+tc.from+"\n  to: {node: node-2}\n  port: 30080\n")
			r := runCommand(t, []string{"check", "-f", f, "--engine", "agent"}, demoCluster()...)
			want := f + ":8: cases[1]." + tc.field + ` (case "beyond"): --engine agent: Antrea's Traceflow starts a probe only at a pod's own port`
			if exitcode.Of(r.err) != exitcode.Usage || !strings.HasPrefix(r.err.Error(), want) {
				t.Fatalf("got exit %d %v, want 1 starting %q", exitcode.Of(r.err), r.err, want)
			}
			if r.connected {
				t.Error("a usage error connected to the cluster")
			}
		})
	}
}

// -o json names a node source node/NAME and an outside one by its address,
// as a single trace's view does.
func TestCaseJSONNamesNodeAndOutsideSources(t *testing.T) {
	web := resolve.Endpoint{Kind: resolve.KindService, Namespace: "np", Name: "web", IP: netip.MustParseAddr("172.18.0.3")}
	for _, tc := range []struct {
		name     string
		res      resolve.Result
		src, dst string
	}{
		{"a node to a node", resolve.Result{Source: resolve.Endpoint{Kind: resolve.KindNode, Name: "node-1", Node: "node-1"},
			Destination: resolve.Endpoint{Kind: resolve.KindNode, Name: "node-2", Node: "node-2", IP: netip.MustParseAddr("172.18.0.3")}},
			"node/node-1", "node/node-2"},
		{"outside to a NodePort", resolve.Result{Source: resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("203.0.113.7"), Node: "node-2"},
			Destination: web, Entry: &resolve.Entry{How: "NodePort", Via: "node-2"}},
			"203.0.113.7", "np/svc/web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			tr := check.Trace{Name: "c", File: "s.yaml", Result: &tc.res, Expect: outcome.ExpectDelivered}
			res := check.Result{Ended: outcome.Ended{Verdict: outcome.Delivered}}
			if err := writeCaseJSON(&b, tr, res); err != nil {
				t.Fatal(err)
			}
			var got caseJSON
			if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
				t.Fatal(err)
			}
			if got.Source != tc.src || got.Destination != tc.dst {
				t.Errorf("source %q, destination %q; want %q, %q", got.Source, got.Destination, tc.src, tc.dst)
			}
		})
	}
}

func TestAllEndpointsFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"to a pod", []string{"pod-a", "pod-b", "--all-endpoints"}, "no Service"},
		{"with --dry-run", []string{"pod-a", "svc/web", "--all-endpoints", "--dry-run"}, "--dry-run"},
		{"with -o yaml", []string{"pod-a", "svc/web", "--all-endpoints", "-o", "yaml"}, "-o json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCommand(t, tc.args, demoCluster()...)
			if exitcode.Of(r.err) != exitcode.Usage || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("got exit %d %v, want 1 saying %q", exitcode.Of(r.err), r.err, tc.want)
			}
			if r.connected {
				t.Error("a usage error connected to the cluster")
			}
		})
	}
}

// Help names every subcommand as users type it, once: cobra already puts
// the parent's display name in front of a subcommand's.
func TestSubcommandUsageLine(t *testing.T) {
	for _, sub := range []string{"check", "cleanup", "install", "uninstall", "install-crd", "version"} {
		r := runCommand(t, []string{sub, "--help"})
		if r.err != nil {
			t.Fatalf("%s --help: %v", sub, r.err)
		}
		if !strings.Contains(r.stdout, "\n  kubectl traceflow "+sub) || strings.Count(r.stdout, "kubectl traceflow kubectl traceflow") > 0 {
			t.Errorf("%s --help does not say `kubectl traceflow %s` once:\n%s", sub, sub, r.stdout)
		}
	}
}

// --all-endpoints from node/NAME starts each trace at the node, as the
// suite's from.node does, not at a pod of that name.
func TestAllEndpointsCaseSource(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want check.From
	}{
		{"node/tf-node-1", check.From{Node: "tf-node-1"}},
		{"np/pod-a", check.From{Namespace: "np", Pod: "pod-a", Pick: check.PickFirst}},
	} {
		t.Run(tc.src, func(t *testing.T) {
			src, err := resolve.ParseSource(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			dst, err := resolve.ParseDestination("np/svc/web")
			if err != nil {
				t.Fatal(err)
			}
			o := &TraceOptions{source: src, destination: dst}
			c := o.allEndpointsCase()
			if c.From != tc.want || c.To.Service != "web" || c.To.Namespace != "np" || !c.To.AllEndpoints {
				t.Errorf("case from %+v to %+v; want from %+v to np's Service web, all endpoints", c.From, c.To, tc.want)
			}
		})
	}
}
