// Package testenv decides whether a test that needs root, Open vSwitch or the
// lab can run here. Where a requirement is missing the test is skipped with
// the reason, except under TRACEFLOW_CI=1 (set by .ci/run and `make test`),
// where a missing requirement is a failure: CI provides everything, so a skip
// there would hide a test that never ran.
package testenv

import (
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// CIEnv is the environment variable that turns skips into failures.
const CIEnv = "TRACEFLOW_CI"

// InCI reports whether missing requirements must fail rather than skip.
func InCI() bool { return os.Getenv(CIEnv) == "1" }

// Missing skips t (or fails it in CI) because of reason.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s=1 but %s: .ci/run must provide it", CIEnv, reason)
	}
	t.Skipf("skipped: %s (set %s=1 to make this a failure)", reason, CIEnv)
}

// RequireRoot skips or fails t unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "test needs root (network namespaces, OVS)")
	}
}

// RequireCommands skips or fails t unless every named command is on PATH.
func RequireCommands(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			Missing(t, "command "+n+" not found (apt-get install the package that provides it, or run make deps)")
		}
	}
}

// RequireOVS skips or fails t unless Open vSwitch's daemons and tools exist
// and the test runs as root.
func RequireOVS(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	RequireCommands(t, "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ovs-appctl", "ovsdb-tool", "ip")
}

// WaitListening polls until something accepts connections on the unix
// socket at path. The file appears at bind(), before the daemon listens, and
// a client connecting in between is refused (ovs-vsctl, ovn-nbctl and
// ovsdb-client do not retry), so the file alone says nothing. timeout only
// ends a wait for a daemon that never came up.
func WaitListening(t testing.TB, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after %s: %v", path, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
