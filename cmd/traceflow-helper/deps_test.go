package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The helper runs on nodes and must stay small and independent of the
// plugin: it never imports pkg/plugin (nor Kubernetes client libraries).
func TestHelperImportsNoPlugin(t *testing.T) {
	// A failing go list is a failure, not a skip: the go command that runs
	// this test is always there, so an error means the check did not run.
	cmd := exec.Command("go", "list", "-deps", ".")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps .: %v\n%s", err, stderr.String())
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "/pkg/plugin") || strings.HasPrefix(dep, "k8s.io/client-go") {
			t.Errorf("traceflow-helper depends on %s", dep)
		}
	}
}
