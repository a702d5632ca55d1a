//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// antreaDouble plays Antrea in the lab's own mode: pods labelled as
// Antrea's controller and agents (Ready, so the plugin's detection, which
// falls back to pods where Antrea's health records are not served, sees
// Antrea), and a controller loop that fills each new Traceflow's status in
// the shapes real Antrea v2.3.2 writes: no role, the receiver's result
// first, Received without componentInfo, Delivered without a pod, the
// dataplane tag gone at Succeeded. Antrea's own behaviour is tested against
// the real Antrea in antrea mode (antrea_test.go); the double stays for
// what one lab cannot show: the same cluster with and without Antrea.
func antreaDouble(ctx context.Context, t testing.TB, dyn dynamic.Interface, podNode map[string]string) <-chan error {
	t.Helper()
	res := dyn.Resource(traceflow.GroupVersionResource)
	w, err := res.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case e, ok := <-w.ResultChan():
				if !ok {
					done <- fmt.Errorf("watch closed")
					return
				}
				if e.Type != watch.Added {
					continue
				}
				u := e.Object.(*unstructured.Unstructured)
				tf, err := traceflow.FromUnstructured(u)
				if err != nil {
					done <- err
					return
				}
				if err := playAntrea(ctx, res, tf, podNode); err != nil {
					done <- err
					return
				}
			}
		}
	}()
	return done
}

func playAntrea(ctx context.Context, res dynamic.NamespaceableResourceInterface, tf *traceflow.Traceflow, podNode map[string]string) error {
	src, dst := podNode[tf.Spec.Source.Pod], podNode[tf.Spec.Destination.Pod]
	now := metav1.Now()
	steps := []traceflow.Status{
		{Phase: traceflow.PhaseRunning, DataplaneTag: 11, StartTime: &now},
		{Phase: traceflow.PhaseSucceeded, StartTime: &now, Results: []report.NodeResult{
			{Node: dst, Timestamp: now.Unix(), Observations: []report.Observation{
				{Component: report.ComponentForwarding, Action: report.ActionReceived},
				{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionDelivered},
			}},
			{Node: src, Timestamp: now.Unix(), Observations: []report.Observation{
				{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded},
				{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionForwarded, TunnelDstIP: labNodes[1].ip},
			}},
		}},
	}
	for _, st := range steps {
		cur, err := res.Get(ctx, tf.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj, err := traceflow.FromUnstructured(cur)
		if err != nil {
			return err
		}
		obj.Status = st
		u, err := traceflow.ToUnstructured(obj)
		if err != nil {
			return err
		}
		if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// Issue 5, done-when 3: auto-detection picks the agent where Antrea serves
// Traceflow and its agents are Ready, and the helper without it; in agent
// mode the plugin creates, watches, renders and exits per the contract.
func TestAgentModeWithAntreaDouble(t *testing.T) {
	f := getTraceFixture(t)
	ns := namespace(t, "antrea")
	apply(t, podSpec(ns, "antrea-controller", labNodes[0].name, map[string]string{"app": "antrea", "component": "antrea-controller"})+
		podSpec(ns, "antrea-agent-1", labNodes[0].name, map[string]string{"app": "antrea", "component": "antrea-agent"})+
		podSpec(ns, "antrea-agent-2", labNodes[1].name, map[string]string{"app": "antrea", "component": "antrea-agent"}))
	waitPods(t, ns, "antrea-controller", "antrea-agent-1", "antrea-agent-2")
	removeDouble := func() {
		mustKubectl(t, "delete", "pods", "-n", ns, "--all", "--grace-period=0", "--force", "--wait=true")
	}
	defer removeDouble()

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir(), "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	double := antreaDouble(ctx, t, dyn, map[string]string{"a": labNodes[0].name, "b": labNodes[1].name, "c": labNodes[0].name})

	r := runTrace(t, "-n", f.ns, "a", "b", "--tcp", "80")
	if r.code != 0 || !strings.Contains(r.stderr, "engine: agent") {
		t.Fatalf("with Antrea: exit %d, stderr %q; want exit 0 and engine agent", r.code, r.stderr)
	}
	recv := r.result(t, labNodes[1].name)
	if last(recv).Action != report.ActionDelivered {
		t.Errorf("agent-mode record: %+v", r.record.Status.Results)
	}
	// Antrea wrote the receiver's result first and no roles: the plugin
	// prints the path sender first all the same.
	if res := r.record.Status.Results; len(res) != 2 || res[0].Node != labNodes[0].name || res[0].Role != report.RoleSender {
		t.Errorf("record not sender first: %+v", res)
	}
	if !strings.Contains(r.stderr, "via "+labNodes[0].name+" -> "+labNodes[1].name+";") {
		t.Errorf("summary does not print the path sender first: %s", r.stderr)
	}
	if out := mustKubectl(t, "get", "traceflows", "-o", "name"); strings.Contains(out, r.record.Name) {
		t.Errorf("agent mode left its Traceflow without --keep: %s", out)
	}
	cancel()
	if err := <-double; err != nil {
		t.Fatalf("the Antrea double failed: %v", err)
	}

	removeDouble()
	start := time.Now()
	r, _ = traceAndTraffic(t, probe{f.ns, "a", "icmp", f.pods["c"].Status.PodIP, 0}, "", "-n", f.ns, "a", "c", "--icmp")
	if r.code != 0 || !strings.Contains(r.stderr, "engine: helper") {
		t.Fatalf("without Antrea: exit %d, stderr %q; want exit 0 and engine helper", r.code, r.stderr)
	}
	t.Logf("helper-mode trace after the double left: %s", time.Since(start).Round(time.Millisecond))
	assertNothingLeft(t)
}
