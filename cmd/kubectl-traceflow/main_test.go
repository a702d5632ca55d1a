package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
)

// asPluginEnv makes the test binary behave as kubectl-traceflow, so the
// tests can put it on PATH under that name and let the real kubectl run it
// without a separate build. Setting pluginBinEnv instead tests a built
// binary (hack/check-kubectl-plugin.sh sets it to bin/kubectl-traceflow).
const (
	asPluginEnv  = "KUBECTL_TRACEFLOW_TEST_AS_PLUGIN"
	pluginBinEnv = "KUBECTL_TRACEFLOW_BIN"
)

func TestMain(m *testing.M) {
	if os.Getenv(asPluginEnv) == "1" {
		os.Exit(run(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
	}
	os.Exit(m.Run())
}

func TestRunPrintsErrorOnceAndExits(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"pod-a", "pod-b", "--tcp", "0"}, genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if got := strings.Count(errOut.String(), "error:"); got != 1 {
		t.Errorf("stderr has %d 'error:' lines, want 1:\n%s", got, errOut.String())
	}
	if out.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", out.String())
	}
}

// silentServer accepts connections and never answers, like an API server
// behind a black hole; it counts who connected.
func silentServer(t testing.TB) (addr string, connections *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	connections = &atomic.Int32{}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	})
	return l.Addr().String(), connections
}

// pluginPath puts kubectl-traceflow on a fresh PATH directory and returns
// that directory.
func pluginPath(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	target := os.Getenv(pluginBinEnv)
	if target == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		target = exe
	}
	target, err := filepath.Abs(target)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "kubectl-traceflow")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestThroughRealKubectl is done-when 1 and 3 of issue 2 through the real
// kubectl: it finds the plugin on PATH, its help says `kubectl traceflow`,
// and usage errors exit 1 with one message while the kubeconfig points at
// an API server that never answers, which none of them may even connect
// to: a usage error is decided before any I/O, which is what makes it
// quick (BenchmarkUsageErrorThroughKubectl reports how quick; a test that
// asserted a time would fail on a busy machine, not on a slow plugin).
func TestThroughRealKubectl(t *testing.T) {
	kubectlRun, connections := realKubectl(t)

	stdout, stderr, code := kubectlRun(t, "--help")
	if code != 0 {
		t.Fatalf("kubectl traceflow --help: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "Usage:\n  kubectl traceflow SRC DST") {
		t.Errorf("kubectl traceflow --help does not show usage as 'kubectl traceflow':\n%s", stdout)
	}

	for _, args := range [][]string{
		{},
		{"pod-a"},
		{"pod-a", "pod-b", "pod-c"},
		{"pod-a", "pod-b", "--tcp", "0"},
		{"pod-a", "pod-b", "--tcp", "65536"},
		{"pod-a", "pod-b", "--udp", "dns"},
		{"pod-a", "pod-b", "--tcp", "80", "--udp", "53"},
		{"pod-a", "pod-b", "--tcp", "80", "--icmp"},
		{"pod-a", "pod-b", "--timeout", "0s"},
		{"pod-a", "pod-b", "--timeout", "301s"},
		{"pod-a", "pod-b", "--engine", "ebpf"},
		{"pod-a", "pod-b", "-o", "table"},
		{"pod-a", "pod-b", "--expect", "maybe"},
		{"pod-a", "10.0.0.256"},
		{"pod-a", "10.0.0.5", "--ipv6"},
	} {
		t.Run(strings.Join(append([]string{"kubectl traceflow"}, args...), " "), func(t *testing.T) {
			before := connections.Load()
			stdout, stderr, code := kubectlRun(t, args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1\nstderr: %s", code, stderr)
			}
			if n := connections.Load() - before; n != 0 {
				t.Errorf("%d connections reached the API server, want none: a usage error is decided before any I/O", n)
			}
			if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "error: ") != 1 {
				t.Errorf("stderr should be one 'error: ' message, got %q", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
	if n := connections.Load(); n != 0 {
		t.Errorf("%d connections reached the API server during usage errors, want none", n)
	}

	// The control: a valid invocation does go to the API server, and a
	// server that never answers is a cluster failure, exit 4.
	_, stderr, code = kubectlRun(t, "pod-a", "pod-b", "--dry-run", "--request-timeout", "1s")
	if code != 4 {
		t.Errorf("valid invocation against a silent API server: exit %d, want 4\nstderr: %s", code, stderr)
	}
	if !strings.Contains(stderr, "check that the cluster is reachable") {
		t.Errorf("stderr does not say what to check: %q", stderr)
	}
	if connections.Load() == 0 {
		t.Error("the valid invocation never reached the silent server: the connection counter proves nothing")
	}
}

// realKubectl puts the plugin on PATH for the real kubectl, with a
// kubeconfig pointing at a silent API server whose connections it counts,
// and returns a function that runs `kubectl traceflow ARGS...`.
func realKubectl(t testing.TB) (run func(t testing.TB, args ...string) (stdout, stderr string, code int), connections *atomic.Int32) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		testenv.Missing(t, "kubectl not found on PATH (make deps installs it)")
	}
	addr, connections := silentServer(t)
	dir := pluginPath(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(kubeconfigTemplate, addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+kubeconfig, "HOME="+t.TempDir(), asPluginEnv+"=1")
	return func(t testing.TB, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"traceflow"}, args...)...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exitErr *exec.ExitError
		switch {
		case errors.As(err, &exitErr):
			code = exitErr.ExitCode()
		case err != nil:
			t.Fatalf("running kubectl traceflow %v: %v", args, err)
		}
		return out.String(), errOut.String(), code
	}, connections
}

// BenchmarkUsageErrorThroughKubectl reports how long a usage error takes
// through the real kubectl (kubectl's start, the plugin's start, the
// message), as ms/run; it never fails on slowness.
func BenchmarkUsageErrorThroughKubectl(b *testing.B) {
	kubectlRun, connections := realKubectl(b)
	kubectlRun(b, "--help") // warms the page cache for kubectl's large binary
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, stderr, code := kubectlRun(b, "pod-a", "pod-b", "--tcp", "0"); code != 1 {
			b.Fatalf("exit %d, want 1: %s", code, stderr)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/run")
	if n := connections.Load(); n != 0 {
		b.Errorf("%d connections reached the API server", n)
	}
}

const kubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- name: silent
  cluster:
    server: https://%s
    insecure-skip-tls-verify: true
contexts:
- name: silent
  context:
    cluster: silent
    user: nobody
current-context: silent
users:
- name: nobody
  user:
    token: not-a-real-token
`

// client-go's errors (runtime.HandleError, which klog writes to stderr at
// severity ERROR) never reach the user's terminal.
func TestKlogSilenced(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	silenceKlog()
	klog.ErrorS(errors.New("use of closed network connection"), "Copying stdout failed", "logger", "UnhandledError")
	klog.Error("legacy error")
	klog.Flush()
	os.Stderr = old
	_ = w.Close()
	got, _ := io.ReadAll(r)
	if len(got) != 0 {
		t.Errorf("klog wrote to stderr: %q", got)
	}
}
