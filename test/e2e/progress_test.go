//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// bareAPIServer starts an etcd WITHOUT progress notifications (no
// --experimental-watch-progress-notify-interval, unlike the lab's) and a
// kube-apiserver on it, and returns a kubeconfig for it. Nothing else runs:
// no controllers, no nodes; the test plays the rest.
func bareAPIServer(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot(), "test", "lab", "build-k8s.sh")).Output()
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("the Kubernetes binaries (test/lab/build-k8s.sh: %v)", err))
	}
	bin := strings.TrimSpace(string(out))
	if _, err := exec.LookPath("etcd"); err != nil {
		testenv.Missing(t, "etcd not found: run make deps")
	}
	dir := t.TempDir()
	etcdPort, peerPort, apiPort := freePort(t), freePort(t), freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	start := func(name string, args ...string) {
		cmd := exec.CommandContext(ctx, name, args...)
		log, err := os.Create(filepath.Join(dir, filepath.Base(name)+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cancel()
			_ = cmd.Wait()
			_ = log.Close()
			if t.Failed() {
				b, _ := os.ReadFile(log.Name())
				t.Logf("%s log (tail):\n%s", name, tail(string(b), 3000))
			}
		})
	}
	start("etcd", "--name", "noprogress", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("noprogress=http://127.0.0.1:%d", peerPort))

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	saKey := write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	saPub := write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	tokens := write("tokens.csv", []byte("e2e-noprogress-token,admin,admin,system:masters\n"))
	start(filepath.Join(bin, "kube-apiserver"),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir="+filepath.Join(dir, "certs"), "--token-auth-file="+tokens,
		"--authorization-mode=AlwaysAllow",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.0.0.0/24", "--enable-priority-and-fairness=false", "--profiling=false")

	kc := write("kubeconfig", fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: np, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: e2e-noprogress-token}}]
contexts: [{name: np, context: {cluster: np, user: admin, namespace: default}}]
current-context: np
`, apiPort))
	eventually(t, 60*time.Second, "the bare API server is ready", func() error {
		_, err := kubectlAt(context.Background(), kc, "get", "--raw", "/readyz")
		return err
	})
	return kc
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// kubectlAt runs the real kubectl (bin/ first on PATH) against kubeconfig.
func kubectlAt(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+filepath.Join(repoRoot(), "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runningPod creates a pod on node and sets its status as a kubelet would
// (no kubelet runs here).
func runningPod(t *testing.T, kc, name, node, ip string, labels map[string]string) {
	t.Helper()
	lb, _ := json.Marshal(labels)
	manifest := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"default","labels":%s},
"spec":{"nodeName":%q,"containers":[{"name":"c","image":"none"}]}}`, name, lb, node)
	f := filepath.Join(t.TempDir(), name+".json")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectlAt(context.Background(), kc, "create", "-f", f); err != nil {
		t.Fatalf("create pod %s: %v\n%s", name, err, out)
	}
	status := fmt.Sprintf(`{"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}],"conditions":[{"type":"Ready","status":"True"}]}}`, ip, ip)
	if out, err := kubectlAt(context.Background(), kc, "patch", "pod", name, "--subresource=status", "--type=merge", "-p", status); err != nil {
		t.Fatalf("patch pod %s status: %v\n%s", name, err, out)
	}
}

// Issue 12, done-when 4: where etcd sends no progress notifications, an
// agent-mode trace still ends with a verdict. The API server here runs on
// an etcd started without them, where a watch without a resourceVersion
// fails after 3 s with "Too large resource version" (checked first, so the
// test cannot pass on an etcd that does send them). Antrea is played by
// the test: real Antrea in the lab runs against the lab's etcd, which sends
// progress notifications, so it cannot show this; the statuses it writes
// are the shapes real Antrea writes (pkg/plugin/agentmode/testdata), and
// its health records are fresh ones that this API server stamps.
func TestAgentModeReplayedWithoutEtcdProgressNotify(t *testing.T) {
	kc := bareAPIServer(t)

	// The premise: a plain watch here ends with "Too large resource version".
	// (The write goes to configmaps; the pods watch cache never sees it.)
	if out, err := kubectlAt(context.Background(), kc, "create", "configmap", "bump"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	out, _ := kubectlAt(ctx, kc, "get", "--raw", "/api/v1/namespaces/default/pods?watch=1&labelSelector=e2e%3Dnothing")
	cancel()
	if !strings.Contains(out, "Too large resource version") {
		t.Fatalf("the premise does not hold: a watch without a resourceVersion on this etcd did not fail with \"Too large resource version\": %q", out)
	}

	if out, err := kubectlAt(context.Background(), kc, "traceflow", "install-crd"); err != nil {
		t.Fatalf("install-crd: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, "the Traceflow CRD is served", func() error {
		_, err := kubectlAt(context.Background(), kc, "get", "traceflows")
		return err
	})
	// No controller-manager creates the namespace's default ServiceAccount,
	// which pod admission looks up.
	if out, err := kubectlAt(context.Background(), kc, "create", "serviceaccount", "default"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	runningPod(t, kc, "a", "tf-node-1", "10.244.1.3", map[string]string{"app": "e2e"})
	runningPod(t, kc, "b", "tf-node-2", "10.244.2.3", map[string]string{"app": "e2e"})
	// Antrea's health records, written now: the API server stamps their
	// managedFields with its clock, which detection reads (no pods stand in).
	healthRecords(t, kc)

	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	res := dynamic.NewForConfigOrDie(cfg).Resource(traceflow.GroupVersionResource)
	b, err := os.ReadFile(filepath.Join(repoRoot(), "pkg", "plugin", "agentmode", "testdata", "antrea-inter-node.json"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []traceflow.Status
	if err := json.Unmarshal(b, &steps); err != nil {
		t.Fatal(err)
	}
	played := make(chan error, 1)
	dctx, dcancel := context.WithCancel(context.Background())
	defer dcancel()
	go func() { played <- playStatuses(dctx, res, steps) }()

	start := time.Now()
	tctx, tcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer tcancel()
	out, err = kubectlAt(tctx, kc, "traceflow", "a", "b", "--tcp", "80", "--timeout", "20s")
	took := time.Since(start)
	if err != nil || !strings.Contains(out, "engine=agent") || !strings.Contains(out, "healthy by AntreaControllerInfo and AntreaAgentInfo (heartbeats at most") || !strings.Contains(out, "Delivered via tf-node-1 -> tf-node-2") {
		t.Fatalf("trace on an etcd without progress notifications: %v after %s\n%s", err, took, out)
	}
	if err := <-played; err != nil {
		t.Fatalf("playing Antrea: %v", err)
	}
	t.Logf("agent-mode trace ended with a verdict in %s on an etcd without progress notifications", took.Round(time.Millisecond))
}

// healthRecords serves AntreaControllerInfo and AntreaAgentInfo (minimal
// CRDs of our own with Antrea's group, names and scope) and writes a healthy
// record for the controller and for each node, as Antrea's monitors do.
func healthRecords(t *testing.T, kc string) {
	t.Helper()
	crd := func(plural, kind string) string {
		return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[1]s.crd.antrea.io}
spec:
  group: crd.antrea.io
  scope: Cluster
  names: {plural: %[1]s, kind: %[2]s, listKind: %[2]sList, singular: %[3]s}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
`, plural, kind, strings.ToLower(kind))
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(types ...string) string {
		var cs []string
		for _, c := range types {
			cs = append(cs, fmt.Sprintf(`{type: %s, status: "True", lastHeartbeatTime: %q}`, c, now))
		}
		return "[" + strings.Join(cs, ", ") + "]"
	}
	applyAt := func(manifest string) {
		f := filepath.Join(t.TempDir(), "m.yaml")
		if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := kubectlAt(context.Background(), kc, "apply", "-f", f); err != nil {
			t.Fatalf("apply: %v\n%s", err, out)
		}
	}
	applyAt(crd("antreacontrollerinfos", "AntreaControllerInfo") + crd("antreaagentinfos", "AntreaAgentInfo"))
	eventually(t, 30*time.Second, "Antrea's health records are served", func() error {
		_, err := kubectlAt(context.Background(), kc, "get", "antreaagentinfos,antreacontrollerinfos")
		return err
	})
	records := fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: AntreaControllerInfo
metadata: {name: antrea-controller}
version: v2.3.2
controllerConditions: %s
`, cond("ControllerHealthy"))
	for _, n := range []string{"tf-node-1", "tf-node-2"} {
		records += fmt.Sprintf(`---
apiVersion: crd.antrea.io/v1beta1
kind: AntreaAgentInfo
metadata: {name: %[1]s}
version: v2.3.2
nodeRef: {kind: Node, name: %[1]s}
agentConditions: %[2]s
`, n, cond("AgentHealthy", "ControllerConnectionUp", "OVSDBConnectionUp", "OpenflowConnectionUp"))
	}
	applyAt(records)
}

// playStatuses waits for the plugin's Traceflow and writes steps into its
// status, one every 300 ms, as Antrea's controller and agents would. It
// finds the object by listing (served from etcd), not by a watch, which on
// this API server would need the progress notifications it lacks.
func playStatuses(ctx context.Context, res dynamic.NamespaceableResourceInterface, steps []traceflow.Status) error {
	var name string
	for name == "" {
		l, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) > 0 {
			name = l.Items[0].GetName()
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, st := range steps {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		cur, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		tf, err := traceflow.FromUnstructured(cur)
		if err != nil {
			return err
		}
		tf.Status = st
		u, err := traceflow.ToUnstructured(tf)
		if err != nil {
			return err
		}
		if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}
