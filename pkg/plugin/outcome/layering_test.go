package outcome

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/kubectl-traceflow/kubectl-traceflow/"

// deps lists pkg's dependencies, itself included, as `go list -deps` sees
// them (test files excluded: only the shipped code is layered).
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH to list imports with (the go that runs the tests must be on PATH): %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}", module+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	set := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		set[l] = true
	}
	return set
}

// TestLayering keeps the house's layers apart: the domain decides, the
// engines produce it, view renders it. An engine that imported view would
// again decide verdicts in the presentation package; a view that imported
// an engine could talk to the cluster.
func TestLayering(t *testing.T) {
	const (
		view    = "pkg/plugin/view"
		outcome = "pkg/plugin/outcome"
	)
	engines := []string{"pkg/plugin/helpermode", "pkg/plugin/agentmode"}
	viewDeps := deps(t, view)
	for _, e := range engines {
		if viewDeps[module+e] {
			t.Errorf("%s imports the engine %s", view, e)
		}
		if deps(t, e)[module+view] {
			t.Errorf("the engine %s imports %s", e, view)
		}
	}
	for p := range deps(t, outcome) {
		if p == module+view || strings.HasPrefix(p, "k8s.io/client-go") {
			t.Errorf("the domain package %s depends on %s", outcome, p)
		}
		for _, e := range engines {
			if p == module+e {
				t.Errorf("the domain package %s depends on the engine %s", outcome, e)
			}
		}
	}
}
