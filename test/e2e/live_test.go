//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmux runs tmux with the given arguments.
func tmux(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Issue 6, done-when 2: the live view on a real terminal. The plugin runs in
// a tmux pane of fixed size; the test reads the screen with capture-pane
// while the trace runs. The view must draw in place (the title stays on the
// first row from the first frame to the last), show what it waits for before
// the verdict, fill in the hops, and end with the verdict banner.
func TestLiveViewInTmux(t *testing.T) {
	f := getTraceFixture(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux not found: run make deps")
	}
	session := fmt.Sprintf("tf-e2e-%d", time.Now().UnixNano()%100000)
	env := ""
	for _, e := range kubectlEnv() {
		if strings.HasPrefix(e, "KUBECONFIG=") || strings.HasPrefix(e, "PATH=") {
			env += " '" + e + "'"
		}
	}
	// A plain shell prompt-less command: the trace, then its exit code, then
	// wait so the pane (and the final screen) stays until the test reads it.
	script := fmt.Sprintf("env%s TERM=xterm-256color kubectl traceflow -n %s a b --tcp 80; echo EXIT=$?; read x", env, f.ns)
	tmux(t, "new-session", "-d", "-s", session, "-x", "100", "-y", "40", script)
	defer exec.Command("tmux", "kill-session", "-t", session).Run() //nolint:errcheck

	var screens []string
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		s := tmux(t, "capture-pane", "-p", "-t", session)
		if len(screens) == 0 || screens[len(screens)-1] != s {
			screens = append(screens, s)
		}
		if strings.Contains(s, "EXIT=") {
			break
		}
		time.Sleep(10 * time.Millisecond) // the capture rate, not a wait for an event
	}
	final := screens[len(screens)-1]
	if err := os.WriteFile(filepath.Join(t.TempDir(), "final.txt"), []byte(final), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d distinct screens; final screen:\n%s", len(screens), final)
	if !strings.Contains(final, "EXIT=0") || !strings.Contains(final, "DELIVERED") {
		t.Fatalf("final screen lacks the verdict or exit 0")
	}
	if real := realTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}); real != served {
		t.Errorf("the live view said DELIVERED; real traffic between the same pods was %s", real)
	}
	waiting, hopsBeforeVerdict := false, false
	for i, s := range screens {
		lines := strings.Split(s, "\n")
		if strings.TrimSpace(s) != "" && !strings.HasPrefix(lines[0], "traceflow ") {
			t.Errorf("screen %d: the title is not on the first row, the view scrolled instead of redrawing:\n%s", i, s)
		}
		if strings.Contains(s, "DELIVERED") {
			continue
		}
		waiting = waiting || strings.Contains(s, "starting helper on") || strings.Contains(s, "waiting for the packet")
		hopsBeforeVerdict = hopsBeforeVerdict || strings.Contains(s, "Forwarded")
	}
	if !waiting {
		t.Error("no screen before the verdict said what the trace was waiting for")
	}
	if !hopsBeforeVerdict {
		t.Log("no capture caught hops before the verdict (they arrived within one capture period)")
	}
	if strings.Contains(final, "\x1b") {
		t.Error("escape sequences left on the screen")
	}
}
