package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/matrix"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// readyPod is a Ready pod of namespace mx with labels.
func readyPod(name, node, ip string, labels map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	p := runningPod("mx", name, node, ip)
	p.Labels = labels
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Ports: ports}}
	return p
}

func matrixCluster() []runtime.Object {
	notReady := readyPod("starting", "node-1", "10.244.1.9", nil)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	host := readyPod("host", "node-1", "10.0.0.1", nil)
	host.Spec.HostNetwork = true
	return []runtime.Object{
		readyPod("client", "node-1", "10.244.1.5", map[string]string{"app": "client"}),
		readyPod("web", "node-2", "10.244.2.7", map[string]string{"app": "web"}, corev1.ContainerPort{Name: "http", ContainerPort: 80}),
		notReady, host,
	}
}

func TestMatrixBadInputCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	head := "apiVersion: " + matrix.APIVersion + "\nkind: " + matrix.Kind + "\ncells:\n"
	ghost := write("ghost.yaml", head+"- {from: client, to: web, port: tcp/80, expect: delivered}\n- {from: client, to: ghost, port: tcp/80, expect: dropped}\n")
	other := write("other.yaml", "apiVersion: "+matrix.APIVersion+"\nkind: "+matrix.Kind+"\nnamespace: prod\ncells: []\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
		// connects: the problem shows only against the cluster.
		connects bool
	}{
		{"a port that is not a port", []string{"--port", "tcp/0"}, `--port "tcp/0": `, false},
		{"a selector that is not one", []string{"-l", "app=(web"}, `-l "app=(web": `, false},
		{"a port of no protocol", []string{"--port", "sctp/80"}, `--port "sctp/80": `, false},
		{"no expected file", []string{"--expect-file", filepath.Join(dir, "none.yaml")}, "--expect-file: open " + dir, false},
		{"selector matching no pod", []string{"-l", "app=ghost"}, "selector app=ghost: 0 Ready pods on the pod network in namespace mx", true},
		{"one pod only", []string{"-l", "app=web"}, "selector app=web: 1 Ready pods on the pod network in namespace mx", true},
		{"an expected file naming a pod that does not exist", []string{"--expect-file", ghost}, ghost + ":5: cells[1].to", true},
		{"an expected file of another namespace", []string{"--expect-file", other}, other + ":3: namespace: the file is for namespace prod, the run is in mx", true},
		{"round trip with the agent engine", []string{"--engine", "agent"}, "--engine agent: Antrea's Traceflow follows the probe one way only", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCommand(t, append([]string{"matrix", "-n", "mx"}, tc.args...), matrixCluster()...)
			if exitcode.Of(r.err) != exitcode.Usage {
				t.Fatalf("exit %d (%v), want 1", exitcode.Of(r.err), r.err)
			}
			if !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to say %q", r.err, tc.want)
			}
			if r.connected != tc.connects {
				t.Errorf("connected to the cluster: %v, want %v", r.connected, tc.connects)
			}
			if w := r.writes(); len(w) > 0 {
				t.Errorf("bad input wrote to the cluster: %v", w)
			}
		})
	}
}

func TestMatrixCode(t *testing.T) {
	ok := check.Result{Code: exitcode.OK}
	incomplete := check.Result{Code: exitcode.Timeout, Ended: outcome.Ended{Verdict: outcome.Incomplete}}
	failed := check.Result{Code: exitcode.Setup}
	diff := []matrix.Mismatch{{}}
	for _, tc := range []struct {
		name       string
		results    []check.Result
		mismatches []matrix.Mismatch
		compared   bool
		want       exitcode.Code
	}{
		{"every cell completed, no file", []check.Result{ok, ok}, nil, false, exitcode.OK},
		{"every cell as the file says", []check.Result{ok, ok}, nil, true, exitcode.OK},
		{"a cell differs", []check.Result{ok, ok}, diff, true, exitcode.Verdict},
		{"an incomplete cell before a difference", []check.Result{ok, incomplete}, diff, true, exitcode.Timeout},
		{"an incomplete cell", []check.Result{ok, incomplete}, nil, false, exitcode.Timeout},
		{"a cell that could not run before all", []check.Result{failed, incomplete}, diff, true, exitcode.Setup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := matrixCode(tc.results, tc.mismatches, tc.compared); got != tc.want {
				t.Errorf("exit %d, want %d", got, tc.want)
			}
		})
	}
}
