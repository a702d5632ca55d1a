package codeshape

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/kubectl-traceflow/kubectl-traceflow/"

// imports maps every product package (module-relative) to the product
// packages it imports directly, as `go list` sees the shipped code (test
// files excluded).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH to list imports with (the go that runs the tests must be on PATH): %v", err)
	}
	out, err := exec.Command(goBin, "list", "-json=ImportPath,Imports", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if strings.HasPrefix(p.ImportPath, module+"test/") || strings.HasPrefix(p.ImportPath, module+"hack/") {
			continue // the lab and the tools are not the product
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		m[name] = nil
		for _, i := range p.Imports {
			if strings.HasPrefix(i, module) {
				m[name] = append(m[name], strings.TrimPrefix(i, module))
			}
		}
	}
	if len(m) < 20 {
		t.Fatalf("go list found %d product packages: not the product", len(m))
	}
	return m
}

// TestOneTraceOnePath keeps one trace on one path through the code: the
// command line maps flags onto the trace runner and the check runner and
// prints what they return; it never runs an engine itself, and nothing
// but the plugin's main imports it. The runner is what the commands call,
// and knows nothing of them or of rendering.
func TestOneTraceOnePath(t *testing.T) {
	m := imports(t)
	const cli = "pkg/plugin/cli"
	// What cli may import (issue 23): the trace runner, the check runner
	// and the matrix it runs (issue 27),
	// install (install, uninstall, install-crd and cleanup), view (the
	// renderers and the escaping of what cli prints), the version, and the
	// flag helpers: the leaf packages its flag values and SRC/DST parse
	// into (exit codes, the endpoint references SRC and DST parse into,
	// the verdicts --expect names, the record printed by --dry-run). The
	// JUnit report belongs to the check runner, the cleanup sweep to
	// install, the escaping to view.
	allowed := []string{
		"internal/version", "pkg/plugin/tracerun", "pkg/plugin/check", "pkg/plugin/matrix", "pkg/plugin/install", "pkg/plugin/view",
		"pkg/plugin/exitcode", "pkg/plugin/resolve", "pkg/plugin/outcome", "pkg/plugin/traceflow",
	}
	for _, i := range m[cli] {
		if !slices.Contains(allowed, i) {
			t.Errorf("%s imports %s: a trace's work belongs in the runner (pkg/plugin/tracerun) or the check runner (pkg/plugin/check), which cli calls", cli, i)
		}
	}
	for p, is := range m {
		if slices.Contains(is, cli) && p != "cmd/kubectl-traceflow" {
			t.Errorf("%s imports %s: only the plugin's main may", p, cli)
		}
	}
	for _, p := range []string{"pkg/plugin/tracerun", "pkg/plugin/check"} {
		for _, i := range m[p] {
			if i == cli || i == "pkg/plugin/view" {
				t.Errorf("%s imports %s: a runner returns outcomes and leaves the commands and the rendering to their callers", p, i)
			}
		}
	}
	for p, is := range m {
		if slices.Contains(is, "pkg/plugin/tracerun") && p != cli && p != "pkg/plugin/check" {
			t.Errorf("%s imports the trace runner: only the commands (cli, check) run traces", p)
		}
	}
}
