package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

func TestDryRunGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		// Done-when 2 of issue 2: pod-a to pod-b on TCP 80, SYN, as YAML.
		{"dry-run-tcp.yaml", []string{"pod-a", "pod-b", "--tcp", "80", "--dry-run", "-o", "yaml"}},
		{"dry-run-tcp.json", []string{"pod-a", "pod-b", "--tcp", "80", "--dry-run", "-o", "json"}},
		{"dry-run-tcp.txt", []string{"pod-a", "pod-b", "--tcp", "80", "--dry-run"}},
		{"dry-run-service.yaml", []string{"pod-a", "svc/web", "--dry-run=client", "-o", "yaml"}},
		{"dry-run-service.txt", []string{"pod-a", "default/svc/web", "--dry-run", "-o", "plain"}},
		{"dry-run-ipv6-udp.yaml", []string{"default/pod-a", "fd00:10:244:2::7", "--udp", "53", "--src-port", "40000",
			"--ttl", "5", "--timeout", "45s", "--dry-run", "-o", "yaml"}},
		{"dry-run-live.txt", []string{"-n", "demo", "pod-c", "default/pod/pod-b", "--live", "--dropped-only",
			"--tcp", "8080", "--tcp-flags", "SYN,ACK", "--dry-run"}},
		{"dry-run-service-src-port.yaml", []string{"pod-a", "svc/web", "--src-port", "40000", "--tcp-flags", "SYN,ACK", "--dry-run", "-o", "yaml"}},
		{"dry-run-icmp.yaml", []string{"pod/pod-a", "192.0.2.1", "--dry-run", "-o", "yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			res := runCommand(t, tt.args, demoCluster()...)
			if res.err != nil {
				t.Fatalf("kubectl traceflow %s: %v", strings.Join(tt.args, " "), res.err)
			}
			if w := res.writes(); len(w) > 0 {
				t.Errorf("--dry-run changed the cluster: %v", w)
			}
			if res.stderr != "" {
				t.Errorf("unexpected stderr: %q", res.stderr)
			}
			golden(t, tt.golden, res.stdout)
		})
	}
}

// TestHelperModeForbidden runs a real (non dry-run) trace where helper pods
// may not be created: the engine is chosen (helper, no Antrea), the tag is
// claimed and given back, and the error names the verb, resource and
// namespace that RBAC refused, with exit 4.
func TestHelperModeForbidden(t *testing.T) {
	res := runCommandWith(t, []string{"pod-a", "pod-b", "--tcp", "80"}, func(cs *fake.Clientset) {
		cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("RBAC"))
		})
	}, demoCluster()...)
	if code := exitcode.Of(res.err); code != exitcode.Setup {
		t.Fatalf("exit code %d (%v), want %d", code, res.err, exitcode.Setup)
	}
	if !strings.Contains(res.err.Error(), "not allowed to create pods in namespace traceflow-system") {
		t.Errorf("error %q does not name what RBAC refused", res.err)
	}
	leases, err := res.kube.CoordinationV1().Leases("").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(leases.Items) != 0 {
		t.Errorf("tag claims left behind: %v %v", leases, err)
	}
	if !strings.Contains(res.stdout, "engine=helper") || !strings.Contains(res.stdout, "FAIL:") {
		t.Errorf("plain output lacks the engine line or the summary:\n%s", res.stdout)
	}
}

func TestServiceWithoutEndpointsWarns(t *testing.T) {
	objs := demoCluster()[:5] // pods and Service web, without its EndpointSlice
	res := runCommand(t, []string{"pod-a", "svc/web", "--dry-run"}, objs...)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if !strings.HasPrefix(res.stderr, "Warning: Service default/web has no ready IPv4 endpoints") {
		t.Errorf("stderr = %q, want the endpoints warning", res.stderr)
	}
}

func TestVersion(t *testing.T) {
	res := runCommand(t, []string{"version"})
	if res.err != nil || !strings.HasPrefix(res.stdout, "kubectl-traceflow ") {
		t.Errorf("version: %q, %v", res.stdout, res.err)
	}
	if res.connected {
		t.Error("version connected to the cluster")
	}
}

func TestHelpSaysKubectlTraceflow(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"install-crd", "--help"}, {"version", "--help"}} {
		res := runCommand(t, args)
		if res.err != nil {
			t.Fatalf("%v: %v", args, res.err)
		}
		if !strings.Contains(res.stdout, "Usage:\n  kubectl traceflow ") {
			t.Errorf("%v: usage does not say 'kubectl traceflow':\n%s", args, res.stdout)
		}
		// The trace's own flags come apart from, and before, the
		// kubeconfig flags (usageTemplate must still match cobra's).
		own, kube := strings.Index(res.stdout, "\nFlags:\n"), strings.Index(res.stdout, "\nKubeconfig flags (as in kubectl):\n")
		if own < 0 || kube < own || !strings.Contains(res.stdout[kube:], "--kubeconfig") {
			t.Errorf("%v: help does not list the kubeconfig flags apart:\n%s", args, res.stdout)
		}
	}
}

func TestColorEnabled(t *testing.T) {
	env := func(v string) func(string) string { return func(string) string { return v } }
	tests := []struct {
		mode     string
		terminal bool
		noColor  string
		want     bool
	}{
		{"auto", true, "", true},
		{"auto", false, "", false},
		{"auto", true, "1", false},
		{"always", false, "1", true},
		{"never", true, "", false},
	}
	for _, tt := range tests {
		if got := colorEnabled(tt.mode, tt.terminal, env(tt.noColor)); got != tt.want {
			t.Errorf("colorEnabled(%s, terminal=%v, NO_COLOR=%q) = %v, want %v", tt.mode, tt.terminal, tt.noColor, got, tt.want)
		}
	}
}

func TestCleanupSweepsOnlyOurs(t *testing.T) {
	objs := append(demoCluster(),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "traceflow-system", Name: "tf-x-sender-abc",
			Labels: map[string]string{labels.ManagedBy: labels.Manager}}})
	res := runCommand(t, []string{"cleanup"}, objs...)
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.stdout != "removed pod traceflow-system/tf-x-sender-abc\n" {
		t.Errorf("stdout %q", res.stdout)
	}
	if _, err := res.kube.CoreV1().Pods("traceflow-system").Get(context.Background(), "tf-x-sender-abc", metav1.GetOptions{}); err == nil {
		t.Error("helper pod not removed")
	}
	if _, err := res.kube.CoreV1().Pods("default").Get(context.Background(), "pod-a", metav1.GetOptions{}); err != nil {
		t.Errorf("cleanup removed a pod that is not ours: %v", err)
	}
}

func TestCompletion(t *testing.T) {
	objs := append(demoCluster(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}})
	for _, tc := range []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"__complete", "pod-"}, []string{"pod-a", "pod-b"}, []string{"svc/web"}},
		{[]string{"__complete", "pod-a", ""}, []string{"pod-b", "svc/web", "demo/"}, nil},
		{[]string{"__complete", "pod-a", "demo/"}, []string{"demo/pod-c"}, []string{"pod-b"}},
		{[]string{"__complete", "pod-a", "pod-b", "--engine", ""}, []string{"auto", "agent", "helper"}, nil},
		{[]string{"__complete", "pod-a", "pod-b", "-o", "w"}, []string{"wide"}, nil},
	} {
		res := runCommand(t, tc.args, objs...)
		if res.err != nil {
			t.Fatalf("%v: %v", tc.args, res.err)
		}
		lines := strings.Split(res.stdout, "\n")
		has := func(s string) bool {
			for _, l := range lines {
				if l == s {
					return true
				}
			}
			return false
		}
		for _, w := range tc.want {
			if !has(w) {
				t.Errorf("%v: completions %q lack %q", tc.args, res.stdout, w)
			}
		}
		for _, n := range tc.not {
			if has(n) {
				t.Errorf("%v: completions %q offer %q", tc.args, res.stdout, n)
			}
		}
	}
}

func TestPodSecurityRestrictedNamespace(t *testing.T) {
	objs := append(demoCluster(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "locked",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}})
	res := runCommand(t, []string{"pod-a", "pod-b", "--helper-namespace", "locked"}, objs...)
	if exitcode.Of(res.err) != exitcode.Setup || !strings.Contains(res.err.Error(), `enforces PodSecurity level "restricted"`) ||
		!strings.Contains(res.err.Error(), "leave --helper-namespace out to use traceflow-system") {
		t.Fatalf("want a PodSecurity error with the fix, got %v", res.err)
	}
	if w := res.writes(); len(w) > 0 {
		t.Errorf("created something before failing: %v", w)
	}
}

// The first run after a krew install: helper mode finds no helper
// namespace and says, in one message, what to run; nothing is created.
func TestHelperNamespaceMissingSaysInstall(t *testing.T) {
	objs := demoCluster()
	objs = objs[:len(objs)-1] // without the namespace install makes
	res := runCommand(t, []string{"pod-a", "pod-b", "--tcp", "80"}, objs...)
	if exitcode.Of(res.err) != exitcode.Setup || !strings.Contains(res.err.Error(), "namespace traceflow-system does not exist") ||
		!strings.Contains(res.err.Error(), "run 'kubectl traceflow install' once") {
		t.Fatalf("want exit 4 saying to run kubectl traceflow install, got %v", res.err)
	}
	if w := res.writes(); len(w) > 0 {
		t.Errorf("created something before failing: %v", w)
	}
}

// kube-system still works when chosen explicitly: helper pods and the tag
// claim go there.
func TestHelperNamespaceKubeSystemExplicit(t *testing.T) {
	objs := append(demoCluster(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}})
	var podNS, leaseNS []string
	res := runCommandWith(t, []string{"pod-a", "pod-b", "--tcp", "80", "--helper-namespace", "kube-system"}, func(cs *fake.Clientset) {
		cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			podNS = append(podNS, a.GetNamespace())
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("stop here"))
		})
		cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			leaseNS = append(leaseNS, a.GetNamespace())
			return false, nil, nil
		})
	}, objs...)
	if len(podNS) == 0 || podNS[0] != "kube-system" || len(leaseNS) == 0 || leaseNS[0] != "kube-system" {
		t.Fatalf("helper pods went to %v, tag claims to %v; want kube-system (err %v)", podNS, leaseNS, res.err)
	}
}
