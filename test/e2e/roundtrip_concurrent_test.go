//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
)

// Round trips from one source at once, on the shared helpers of a check
// suite: an answer carries nothing of its trace, so traces from one pod
// must not take each other's answers (the helpers' catch keys). Before,
// answers to pings and to probes that drew the same source port were
// reported lost or unanswered (one cell in about 1,500 of an ovn-mode
// matrix). Every case's verdict and answer must agree with the workload's
// own real traffic between the same pods.
func TestCheckRoundTripsFromOneSource(t *testing.T) {
	f := getTraceFixture(t)
	suite := fmt.Sprintf("apiVersion: %s\nkind: %s\ndefaults: {namespace: %s, timeout: 20s, roundTrip: true, expect: any}\ncases:\n",
		check.APIVersion, check.Kind, f.ns)
	n := 0
	for round := range 2 {
		for _, dst := range []string{"b", "c"} {
			for _, p := range []string{"port: 80", "port: 81", "protocol: UDP, port: 5000", "protocol: UDP, port: 5001", "protocol: ICMP"} {
				suite += fmt.Sprintf("- {name: 'a to %s, %s (%d)', from: {pod: a}, to: {pod: %s}, %s}\n", dst, p, round, dst, p)
				n++
			}
		}
	}
	file := filepath.Join(t.TempDir(), "one-source.yaml")
	if err := os.WriteFile(file, []byte(suite), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCheck(t, "", "-f", file)
	if r.code != 0 || len(r.cases) != n {
		t.Errorf("exit %d with %d traces, want 0 with %d", r.code, len(r.cases), n)
	}
	for _, c := range r.cases {
		p := probeOf(t, c)
		real := realTraffic(t, p)
		want, ok := replyFor[real]
		if !ok {
			t.Fatalf("case %q: real traffic %s: the destination must answer for this case", c.Case, real)
		}
		if c.Verdict != "Delivered" || c.Reply != want {
			t.Errorf("case %q: %s and %q (%s); real traffic was %s, so Delivered and %s", c.Case, c.Verdict, c.Reply, c.Message, real, want)
		}
	}
	assertNothingLeft(t)
}
