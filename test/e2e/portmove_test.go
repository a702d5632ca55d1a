//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestRoundTripFromOnePortTwice: the same round trip through a Service of
// one endpoint, twice from one source port (--src-port, as a CI smoke check
// repeats it), both answered. The first's connection is still tracked
// (closing) when the second's DNAT commits, so conntrack moves the
// second's source port, as it would a real client's: the trace says so,
// follows the probe to its delivery and the answer back to the source.
// Found in Antrea's lab mode, where the second ended incomplete at the
// DNAT (and, with random ports, one round trip from outside in about 60).
func TestRoundTripFromOnePortTwice(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "port-twice")
	apply(t, podSpec(ns, "a", labNodes[0].name, nil)+podSpec(ns, "b", labNodes[1].name, map[string]string{"app": "port-twice"})+fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: one, namespace: %s}
spec:
  selector: {app: port-twice}
  ports: [{port: 80, targetPort: 80}]
`, ns))
	waitPods(t, ns, "a", "b")
	const port = "62777"
	moved := "conntrack moved the probe's source port from " + port + " to "
	for i := range 2 {
		r := runTrace(t, "-n", ns, "a", "svc/one", "--round-trip", "--src-port", port)
		if r.code != 0 {
			t.Fatalf("round trip %d: exit %d, want 0 (answered)", i, r.code)
		}
		checkRoundTrip(t, r, "Answered", ns+"/a", false)
		said := false
		for _, res := range r.record.Status.Results {
			for _, o := range res.Observations {
				said = said || strings.Contains(o.ComponentInfo, moved)
			}
		}
		if said != (i == 1) {
			t.Errorf("round trip %d says %q: %v, want %v", i, moved, said, i == 1)
		}
	}
	assertNothingLeft(t)
}
