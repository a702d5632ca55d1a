//go:build e2e

package e2e

// Traces interrupted (Ctrl-C, twice, SIGKILL) leave no helper and no flow behind.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	corev1 "k8s.io/api/core/v1"
)

// kubectlEnv is the environment of the real kubectl: the lab's kubeconfig
// and the built plugin first on PATH.
func kubectlEnv() []string {
	return append(os.Environ(),
		"KUBECONFIG="+filepath.Join(stateDir(), "kubeconfig"),
		"PATH="+filepath.Join(repoRoot(), "bin")+":"+os.Getenv("PATH"))
}

// startTrace starts `kubectl traceflow ARGS` (plain output) and returns the
// process and a channel of its output lines.
func startTrace(t testing.TB, args ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"traceflow"}, withEngine(args)...)...)
	cmd.Env = kubectlEnv()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			t.Log(sc.Text())
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() {
		_ = cmd.Wait()
		_ = pw.Close()
	}()
	return cmd, lines
}

// waitLine waits for a line containing all of subs.
func waitLine(t testing.TB, lines <-chan string, d time.Duration, subs ...string) {
	t.Helper()
	timer := time.After(d)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("output ended before a line with %q", subs)
			}
			all := true
			for _, s := range subs {
				all = all && strings.Contains(l, s)
			}
			if all {
				return
			}
		case <-timer:
			t.Fatalf("no line with %q within %s", subs, d)
		}
	}
}

// waitLines waits until, for each group, a line holding all its parts has
// appeared, in any order.
func waitLines(t testing.TB, lines <-chan string, d time.Duration, groups ...[]string) {
	t.Helper()
	seen := make([]bool, len(groups))
	left := len(groups)
	timer := time.After(d)
	for left > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("output ended before lines with %q", groups)
			}
			for i, g := range groups {
				all := true
				for _, sub := range g {
					all = all && strings.Contains(l, sub)
				}
				if all && !seen[i] {
					seen[i], left = true, left-1
				}
			}
		case <-timer:
			t.Fatalf("not all of %q within %s", groups, d)
		}
	}
}

// helpersAndFlowsGone says what is left of traces on the nodes: helper
// pods the kubelets still run (a pod deleted from the API may still have
// its container started; once the kubelet has let it go, none can start
// any more) and flows with a trace's cookie.
func helpersAndFlowsGone(t testing.TB) error {
	for _, n := range labNodes {
		pods, err := kubeletHelperPods(n.name)
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("kubelet on %s still runs helper pod %s", n.name, pods[0].Name)
		}
		if fl := traceFlows(t, n.name); fl != "" {
			return fmt.Errorf("trace flows on %s: %s", n.name, fl)
		}
	}
	return nil
}

// kubeletHelperPods lists the helper pods a node's kubelet runs (by the
// managed-by label), as the kubelet sees them, not the API server.
func kubeletHelperPods(node string) ([]corev1.Pod, error) {
	raw, err := kubectl(context.Background(), "get", "--raw", "/api/v1/nodes/"+node+"/proxy/pods")
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := json.Unmarshal([]byte(raw), &pods); err != nil {
		return nil, fmt.Errorf("the kubelet's pods on %s: %w", node, err)
	}
	var ours []corev1.Pod
	for _, p := range pods.Items {
		if p.Labels[labels.ManagedBy] == labels.Manager {
			ours = append(ours, p)
		}
	}
	return ours, nil
}

func helperPods(t testing.TB) string {
	t.Helper()
	return strings.TrimSpace(mustKubectl(t, "get", "pods", "-A", "-l="+labels.Selector, "-o", "name"))
}

// SIGINT mid-trace: by the time the plugin has exited, its helper pods are
// deleted (it waits for the API server to accept the deletions), and no
// trace flow outlives the trace's timeout.
func TestTraceInterruptRemovesHelpers(t *testing.T) {
	f := getTraceFixture(t)
	const timeout = 5 * time.Second
	cmd, lines := startTrace(t, "-n", f.ns, "a", "b", "--tcp", "80", "-o", "plain", "--timeout", "5s")
	// Both helper pods exist (the plugin says "scheduled" once a pod is
	// created) and the trace is far from done: their containers take most
	// of a second to start. A later point (a helper's ready line) races
	// with the end of a fast trace.
	waitLine(t, lines, 60*time.Second, "waiting", "role=Sender", "scheduled")
	start := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range lines { // until the plugin exits
	}
	t.Logf("the plugin exited %s after SIGINT", time.Since(start).Round(time.Millisecond))
	if p := helperPods(t); p != "" {
		t.Errorf("the plugin exited after SIGINT with its helper pods still there: %s", p)
	}
	// A helper whose container was still being created may yet run and
	// install flows; none may outlive the trace's timeout (flowsGoneBy
	// checks their hard timeouts and then that they went).
	flowsGoneBy(t, start, timeout)
	eventually(t, time.Minute, "helpers gone from the kubelets", func() error { return helpersAndFlowsGone(t) })
	assertNothingLeft(t)
}

// SIGKILL mid-trace: `kubectl traceflow cleanup` removes what is left, and
// the flows expire with the trace's timeout.
func TestTraceKilledThenCleanup(t *testing.T) {
	f := getTraceFixture(t)
	const timeout = 5 * time.Second
	cmd, lines := startTrace(t, "-n", f.ns, "a", "b", "--tcp", "80", "-o", "plain", "--timeout", "5s")
	// Both helper containers run (the sender waits for its go, the receiver
	// is ready), so no helper process can start after the kill.
	waitLines(t, lines, 60*time.Second, []string{"role=Sender", "waiting for the receivers"}, []string{"ready", "role=Receiver"})
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	// Right after the kill the trace's claim is still live (it would be a
	// running trace's): cleanup spares it. Once the claim, no longer renewed,
	// has expired by the API server's clock (15 s), cleanup removes the
	// claim and the helper pods.
	out := mustKubectl(t, "traceflow", "cleanup")
	if strings.Contains(out, "removed lease") {
		t.Errorf("cleanup right after SIGKILL removed a claim that had not expired:\n%s", out)
	}
	var all strings.Builder
	eventually(t, 25*time.Second, "cleanup removes the killed trace's claim", func() error {
		out := mustKubectl(t, "traceflow", "cleanup")
		all.WriteString(out)
		if !strings.Contains(all.String(), "removed lease") {
			return fmt.Errorf("not yet:\n%s", out)
		}
		return nil
	})
	if !strings.Contains(all.String(), "removed pod") && helperPods(t) != "" {
		t.Errorf("cleanup after SIGKILL left helper pods:\n%s", all.String())
	}
	// Helpers still starting when the plugin died may install flows after
	// the kill; the promise is that none outlives the trace's timeout. So
	// wait until no helper process runs any more and no trace flow is left.
	eventually(t, timeout+3*time.Second, "helpers gone and trace flows expired", func() error {
		return helpersAndFlowsGone(t)
	})
	t.Logf("flows gone %s after SIGKILL (trace timeout %s)", time.Since(killed).Round(time.Millisecond), timeout)
	assertNothingLeft(t)
}

// A second Ctrl-C exits at once; the trace's objects are removed by a
// cleanup in the background, within seconds.
func TestTraceSecondInterruptExitsAtOnce(t *testing.T) {
	f := getTraceFixture(t)
	cmd, lines := startTrace(t, "-n", f.ns, "a", "b", "--tcp", "80", "-o", "plain", "--timeout", "5s")
	waitLine(t, lines, 60*time.Second, "waiting", "role=Sender", "scheduled")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// Two signals sent back to back may reach the process as one (a
	// pending signal is not queued twice): the second goes once the
	// first has ended the trace, while the plugin stops its helpers.
	waitLine(t, lines, 10*time.Second, "verdict", "interrupted")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		// Stopping helpers that the kubelet is still starting takes a
		// kubelet round trip, far longer than a signal's delivery.
		t.Fatalf("second Ctrl-C: %v (the plugin had already exited: it stopped its helpers faster than the test could signal)", err)
	}
	start := time.Now()
	var said []string
	for l := range lines {
		said = append(said, l)
	}
	t.Logf("the plugin exited %s after a second Ctrl-C", time.Since(start).Round(time.Millisecond))
	// At once: it hands the deletions to a background cleanup and says so,
	// rather than waiting for them (which a slow machine would make slow).
	if code := cmd.ProcessState.ExitCode(); code != 3 || !strings.Contains(strings.Join(said, "\n"), "interrupted again: exiting now; removing the trace's helper pods, tag claim and record in the background") {
		t.Errorf("after a second Ctrl-C: exit %d, want 3 and word of the background cleanup:\n%s", code, strings.Join(said, "\n"))
	}
	eventually(t, 10*time.Second, "helper pods and claim removed after a second Ctrl-C", func() error {
		if p := helperPods(t); p != "" {
			return fmt.Errorf("still there: %s", p)
		}
		if l := strings.TrimSpace(mustKubectl(t, "get", "leases", "-A", "-l="+labels.Selector, "-o", "name")); l != "" {
			return fmt.Errorf("claims: %s", l)
		}
		return nil
	})
	eventually(t, 10*time.Second, "helpers gone and trace flows expired", func() error { return helpersAndFlowsGone(t) })
}
