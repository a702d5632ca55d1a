package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The helper runs on nodes and must stay small and independent of the
// plugin: it never imports pkg/plugin (nor Kubernetes client libraries).
func TestHelperImportsNoPlugin(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "/pkg/plugin") || strings.HasPrefix(dep, "k8s.io/client-go") {
			t.Errorf("traceflow-helper depends on %s", dep)
		}
	}
}
