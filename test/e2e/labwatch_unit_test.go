//go:build !e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sleeper starts a process that lives until killed, and records its PID
// as lab.sh records a daemon's.
func sleeper(t *testing.T, dir, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "pids", name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// kill ends a sleeper and reaps it, as init reaps a dead daemon.
func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
}

func labWatchDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{"pids", "logs"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A dead daemon is named on the second read that finds it dead under the
// same PID, with the end of its own log; a restarted one (a new PID
// written), one lab.sh stops on purpose and a live one never are.
func TestLabWatchNamesADeadDaemonOnly(t *testing.T) {
	dir := labWatchDir(t)
	log := "|00001|vlog|INFO|opened log file\n|00002|util|EMER|lib/conntrack.c:1063: assertion failed\n"
	if err := os.WriteFile(filepath.Join(dir, "logs", "tf-node-1-ovs-vswitchd.ovs.log"), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	sleeper(t, dir, "tf-node-2-kubelet")
	vswitchd := sleeper(t, dir, "tf-node-1-ovs-vswitchd")
	seen := map[string]int{}
	if got := deadDaemons(dir, seen); got != "" {
		t.Fatalf("every daemon alive, yet: %s", got)
	}

	// lab.sh restart: the old process gone, then a new PID written.
	kill(t, vswitchd)
	if got := deadDaemons(dir, seen); got != "" {
		t.Fatalf("one read of a dead PID is no death yet (a restart writes the new one): %s", got)
	}
	vswitchd = sleeper(t, dir, "tf-node-1-ovs-vswitchd")
	if got := deadDaemons(dir, seen); got != "" {
		t.Fatalf("restarted under a new PID, yet: %s", got)
	}

	// lab.sh stop_component: marked as stopping on purpose, then gone for
	// as long as the stop takes (kube-apiserver's took 12 s once).
	if err := os.WriteFile(filepath.Join(dir, "pids", "tf-node-1-ovs-vswitchd.stopping"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	kill(t, vswitchd)
	for range 3 {
		if got := deadDaemons(dir, seen); got != "" {
			t.Fatalf("stopped on purpose (NAME.stopping), yet: %s", got)
		}
	}
	vswitchd = sleeper(t, dir, "tf-node-1-ovs-vswitchd")
	if err := os.Remove(filepath.Join(dir, "pids", "tf-node-1-ovs-vswitchd.stopping")); err != nil {
		t.Fatal(err)
	}

	// It dies and stays dead.
	kill(t, vswitchd)
	if got := deadDaemons(dir, seen); got != "" {
		t.Fatalf("first read of the death: %s", got)
	}
	got := deadDaemons(dir, seen)
	for _, want := range []string{"tf-node-1-ovs-vswitchd (pid " + strconv.Itoa(vswitchd.Process.Pid) + ") is no longer running", "EMER|lib/conntrack.c:1063"} {
		if !strings.Contains(got, want) {
			t.Errorf("the report %q does not say %q", got, want)
		}
	}
	if strings.Contains(got, "kubelet") {
		t.Errorf("the live kubelet is named: %s", got)
	}
}

// The watch itself: a daemon that dies while it runs is what labDead then
// says, and stopWatch ends it.
func TestLabWatchReportsWhileRunning(t *testing.T) {
	dir := labWatchDir(t)
	agent := sleeper(t, dir, "unit-test-daemon")
	startWatch(dir)
	t.Cleanup(stopWatch)
	if d := labDead(); d != "" {
		t.Fatalf("dead before anything died: %s", d)
	}
	kill(t, agent)
	deadline := time.Now().Add(30 * time.Second) // two reads a second apart, on a loaded machine
	for labDead() == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if d := labDead(); !strings.Contains(d, "unit-test-daemon") || !strings.Contains(d, "no log in") {
		t.Errorf("labDead() = %q, want unit-test-daemon named, with no log found", d)
	}
}
