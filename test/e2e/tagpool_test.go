//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
)

// holdOtherTags claims the given DSCP values as another plugin would (its
// Leases in the helper namespace, live for ten minutes by the API server's
// clock), and returns what deletes them; the test's cleanup deletes them
// too, should it end first.
func holdOtherTags(t *testing.T, values []uint8) (release func()) {
	t.Helper()
	var b strings.Builder
	var names []string
	for _, d := range values {
		name := tagalloc.LeaseName(d)
		names = append(names, name)
		fmt.Fprintf(&b, `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: %s
  namespace: traceflow-system
  labels: {%s: %s, %s: e2e-other-plugin}
spec: {holderIdentity: e2e-other-plugin/1, leaseDurationSeconds: 600}
---
`, name, labels.ManagedBy, labels.Manager, labels.Trace)
	}
	apply(t, b.String())
	release = func() {
		args := append([]string{"delete", "lease", "-n", "traceflow-system", "--ignore-not-found"}, names...)
		if _, err := kubectl(context.Background(), args...); err != nil {
			t.Errorf("delete the other plugin's claims: %v", err)
		}
	}
	t.Cleanup(release)
	return release
}
