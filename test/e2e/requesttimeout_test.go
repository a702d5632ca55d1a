//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// --request-timeout bounds each API call; the watches and helper log
// streams that last the whole trace are not cut by it (issue 15: "every API
// call honours the context, --request-timeout is respected"). A trace takes
// longer than 1 s in every mode, so a cut stream would fail it.
func TestTraceWithShortRequestTimeout(t *testing.T) {
	f := getTraceFixture(t)
	engines := []string{"helper"}
	if labMode() == modeAntrea {
		engines = append(engines, "agent")
	}
	want := realTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80})
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			r := runTrace(t, "-n", f.ns, "a", "b", "--tcp", "80", "--engine", engine, "--request-timeout=1s")
			checkAgainstTraffic(t, r, want, "")
			if strings.Contains(r.stderr, "unable to cancel request") {
				t.Errorf("client-go could not cancel a request through the plugin's round tripper: %s", r.stderr)
			}
		})
	}
}
