//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A user who holds only what `kubectl traceflow install --group G` binds
// to G traces in helper mode: the roles are enough, and nothing of it
// touches kube-system.
func TestTraceAsUserBoundByInstall(t *testing.T) {
	f := getTraceFixture(t)
	const group = "e2e-traceflow-users"
	out := mustKubectl(t, "traceflow", "install", "--group", group)
	if !strings.Contains(out, "rolebindings.rbac.authorization.k8s.io/kubectl-traceflow") {
		t.Fatalf("install --group made no role binding:\n%s", out)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = kubectl(ctx, "delete", "clusterrolebinding", "kubectl-traceflow", "--ignore-not-found")
		_, _ = kubectl(ctx, "delete", "rolebinding", "-n", "traceflow-system", "kubectl-traceflow", "--ignore-not-found")
	})
	// The user holds nothing else: it may not even list pods in kube-system
	// beyond reading, nor create them there.
	if out, err := kubectl(context.Background(), "auth", "can-i", "create", "pods", "-n", "kube-system", "--as", "e2e-alice", "--as-group", group); err == nil {
		t.Fatalf("the bound user may create pods in kube-system: %s", out)
	}
	traceAndTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}, "", "-n", f.ns, "a", "b", "--tcp", "80", "--as", "e2e-alice", "--as-group", group)
	assertNothingLeft(t)
}

// kube-system still works when chosen explicitly.
func TestTraceHelperNamespaceKubeSystem(t *testing.T) {
	f := getTraceFixture(t)
	traceAndTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}, "", "-n", f.ns, "a", "b", "--tcp", "80", "--helper-namespace", "kube-system")
	assertNothingLeft(t)
}
