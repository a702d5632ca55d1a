//go:build e2e

// Package e2e runs end-to-end tests against the lab (test/lab): a real
// two-node Kubernetes cluster with an OVS dataplane on this machine. The
// harness brings the lab up once per run, or reuses one that is already up,
// and the last test (zz_down_test.go) tears it down and checks that nothing
// of it remains, unless TRACEFLOW_KEEP_LAB=1. Everything goes through the
// real kubectl with the built binaries first on PATH, as a user would run it.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
)

// Node names and addresses the lab gives its nodes (test/lab/lab.sh).
var labNodes = []struct{ name, ip, podCIDR string }{
	{"tf-node-1", "10.89.0.11", "10.244.1.0/24"},
	{"tf-node-2", "10.89.0.12", "10.244.2.0/24"},
}

const workloadImage = "ghcr.io/kubectl-traceflow/lab-workload:v1"

// lab is what TestMain learned while bringing the lab up.
var lab struct {
	setupErr   string        // why the lab is unusable ("" when it is up)
	reused     bool          // it was already up when the run began
	upDuration time.Duration // how long lab.sh up took (binaries cached)
	upOutput   string
	down       bool // zz_down_test.go took it down
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

func stateDir() string {
	if s := os.Getenv("TFLAB_STATE"); s != "" {
		return s
	}
	return "/run/traceflow-lab"
}

func labScript() string { return filepath.Join(repoRoot(), "test", "lab", "lab.sh") }

func keepLab() bool { return os.Getenv("TRACEFLOW_KEEP_LAB") == "1" }

func TestMain(m *testing.M) {
	if err := selectTests(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	// lab.sh keeps a running lab's CNI when TFLAB_CNI is unset; the tests
	// chosen are those of labMode(), so that is the lab they get.
	_ = os.Setenv("TFLAB_CNI", labMode())
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		// Listing runs no test: the lab is neither brought up nor down.
		os.Exit(m.Run())
	}
	setup()
	if lab.setupErr == "" {
		startWatch(stateDir())
	}
	code := m.Run()
	stopWatch()
	if d := labDead(); d != "" {
		// Again after every test's output, where the recap is read.
		fmt.Fprintf(os.Stderr, "e2e: during this run a daemon of the lab died: %s\n", d)
		code = 1
	}
	if lab.setupErr == "" && !lab.down && !keepLab() {
		out, err := exec.Command(labScript(), "down").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "lab down: %v\n%s", err, out)
			code = 1
		}
	}
	os.Exit(code)
}

func setup() {
	if os.Geteuid() != 0 {
		lab.setupErr = "the lab needs root (network namespaces, OVS, kubelet)"
		return
	}
	for _, c := range []string{"kubectl", "ovs-vswitchd", "containerd", "etcd", "nsenter"} {
		if _, err := exec.LookPath(c); err != nil {
			lab.setupErr = c + " not found: run make deps"
			return
		}
	}
	// The Kubernetes build is cold only once per machine; it is not part of
	// the measured lab-up time.
	if out, err := exec.Command(filepath.Join(repoRoot(), "test", "lab", "build-k8s.sh")).CombinedOutput(); err != nil {
		lab.setupErr = fmt.Sprintf("building the Kubernetes binaries: %v\n%s", err, out)
		return
	}
	// Likewise the mode's own build (Antrea's, in Antrea mode).
	if b := modeRow(labMode()).prebuild; b != "" {
		if out, err := exec.Command(filepath.Join(repoRoot(), "test", "lab", b)).CombinedOutput(); err != nil {
			lab.setupErr = fmt.Sprintf("building %s: %v\n%s", modeRow(labMode()).prebuilds, err, out)
			return
		}
	}
	// A lab up in another mode is taken down first: switching is not the
	// warm start TestLabUpWarmAndIdempotent measures.
	if running, err := os.ReadFile(filepath.Join(stateDir(), "cni")); err == nil && strings.TrimSpace(string(running)) != labMode() {
		if out, err := exec.Command(labScript(), "down").CombinedOutput(); err != nil {
			lab.setupErr = fmt.Sprintf("lab.sh down (the lab ran %s): %v\n%s", strings.TrimSpace(string(running)), err, out)
			return
		}
	}
	lab.reused = exec.Command(labScript(), "status").Run() == nil
	start := time.Now()
	out, err := exec.Command(labScript(), "up").CombinedOutput()
	lab.upDuration, lab.upOutput = time.Since(start), string(out)
	if err != nil {
		lab.setupErr = fmt.Sprintf("lab.sh up: %v\n%s", err, out)
		return
	}
	// As the lab's admin, once: the helper namespace, the roles and the CRD
	// that helper-mode traces need (idempotent, so a reused lab is fine).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := kubectl(ctx, "traceflow", "install"); err != nil {
		lab.setupErr = fmt.Sprintf("kubectl traceflow install: %v\n%s", err, out)
	}
}

// requireLab skips (or, in CI, fails) a test when the lab could not start.
func requireLab(t testing.TB) {
	t.Helper()
	if lab.setupErr != "" {
		testenv.Missing(t, lab.setupErr)
	}
	if lab.down {
		t.Fatal("the lab was already taken down")
	}
	if d := labDead(); d != "" {
		t.Fatalf("a daemon of the lab died earlier in this run, so no later result can be trusted: %s", d)
	}
}

// kubectl runs the real kubectl against the lab, with bin/ first on PATH so
// that `kubectl traceflow` finds the built plugin.
func kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = kubectlEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), nil
}

func mustKubectl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func apply(t testing.TB, manifest string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "apply", "-f", "-")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(stateDir(), "kubeconfig"))
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifest)
	}
}

// namespace creates a namespace for one test and deletes it afterwards
// (without waiting: the lab is torn down at the end anyway).
func namespace(t testing.TB, name string) string {
	t.Helper()
	ns := fmt.Sprintf("e2e-%s-%d", name, time.Now().UnixNano()%100000)
	createNamespace(t, ns)
	t.Cleanup(func() {
		if !lab.down {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = kubectl(ctx, "delete", "namespace", ns, "--wait=false")
		}
	})
	return ns
}

// createNamespace creates ns and waits for its default service account,
// without which the apiserver refuses pods.
func createNamespace(t testing.TB, ns string) {
	t.Helper()
	mustKubectl(t, "create", "namespace", ns)
	eventually(t, 30*time.Second, "service account default in "+ns, func() error {
		_, err := kubectl(context.Background(), "get", "serviceaccount", "-n", ns, "default")
		return err
	})
}

func getPod(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := json.Unmarshal([]byte(mustKubectl(t, "get", "pod", "-n", ns, name, "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// waitPods waits until the named pods are Running and Ready, or Succeeded.
func waitPods(t testing.TB, ns string, names ...string) map[string]*corev1.Pod {
	t.Helper()
	out := map[string]*corev1.Pod{}
	deadline := time.Now().Add(90 * time.Second)
	for _, n := range names {
		for {
			p := getPod(t, ns, n)
			ready := p.Status.Phase == corev1.PodSucceeded
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			if ready {
				out[n] = p
				break
			}
			if p.Status.Phase == corev1.PodFailed || time.Now().After(deadline) {
				ev, _ := kubectl(context.Background(), "get", "events", "-n", ns)
				t.Fatalf("pod %s/%s not ready (phase %s)\n%s", ns, n, p.Status.Phase, ev)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return out
}

// execIn runs the workload binary in a pod.
func execIn(ns, pod string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return kubectl(ctx, append([]string{"exec", "-n", ns, pod, "--", "/workload"}, args...)...)
}

// eventually retries f every 200 ms until it returns nil or d passes.
func eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nodeExec runs a command in a lab node's namespaces.
func nodeExec(t testing.TB, node string, args ...string) string {
	t.Helper()
	out, err := exec.Command(labScript(), append([]string{"exec", node}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("on %s: %s: %v\n%s", node, strings.Join(args, " "), err, out)
	}
	return string(out)
}
