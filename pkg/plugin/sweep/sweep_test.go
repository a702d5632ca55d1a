package sweep

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

type fakeRecords struct {
	items map[string]traceflow.Traceflow
}

func (f *fakeRecords) List(context.Context, string) ([]traceflow.Traceflow, error) {
	var out []traceflow.Traceflow
	for _, tf := range f.items {
		out = append(out, tf)
	}
	return out, nil
}

func (f *fakeRecords) Delete(_ context.Context, name string) error {
	delete(f.items, name)
	return nil
}

func meta(ns, name string, ours bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name}
	if ours {
		m.Labels = map[string]string{"app.kubernetes.io/managed-by": "kubectl-traceflow"}
	}
	return m
}

func record(name string, phase traceflow.Phase) traceflow.Traceflow {
	return traceflow.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: traceflow.Status{Phase: phase}}
}

func TestSweepRemovesOnlyOurs(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Pod{ObjectMeta: meta("kube-system", "tf-x-sender-abc", true)},
		&corev1.Pod{ObjectMeta: meta("kube-system", "coredns", false)},
		&coordinationv1.Lease{ObjectMeta: meta("kube-system", "kubectl-traceflow-tag-7", true)},
		&coordinationv1.Lease{ObjectMeta: meta("kube-system", "kube-scheduler", false)},
	)
	recs := &fakeRecords{items: map[string]traceflow.Traceflow{
		"left-running": record("left-running", traceflow.PhaseRunning),
		"kept-done":    record("kept-done", traceflow.PhaseSucceeded),
	}}
	got, err := Sweep(context.Background(), cs, recs, Options{Namespace: "kube-system"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Pods) != 1 || got.Pods[0] != "kube-system/tf-x-sender-abc" || len(got.Leases) != 1 || len(got.Records) != 1 || got.Records[0] != "left-running" {
		t.Fatalf("removed %+v", got)
	}
	pods, _ := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	leases, _ := cs.CoordinationV1().Leases("").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 1 || pods.Items[0].Name != "coredns" || len(leases.Items) != 1 || leases.Items[0].Name != "kube-scheduler" {
		t.Fatalf("sweep touched what is not ours: pods %v leases %v", pods.Items, leases.Items)
	}
	if _, ok := recs.items["kept-done"]; !ok {
		t.Fatal("a finished record kept with --keep was removed without --all-records")
	}

	got, err = Sweep(context.Background(), cs, recs, Options{AllRecords: true})
	if err != nil || len(got.Records) != 1 || len(recs.items) != 0 {
		t.Fatalf("--all-records: %+v %v left %v", got, err, recs.items)
	}
}

func TestSweepDryRunDeletesNothing(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{ObjectMeta: meta("kube-system", "tf-x-sender-abc", true)})
	recs := &fakeRecords{items: map[string]traceflow.Traceflow{"r": record("r", traceflow.PhaseRunning)}}
	got, err := Sweep(context.Background(), cs, recs, Options{DryRun: true})
	if err != nil || len(got.Pods) != 1 || len(got.Records) != 1 {
		t.Fatalf("dry run listed %+v %v", got, err)
	}
	if len(recs.items) != 1 {
		t.Fatal("dry run deleted a record")
	}
	// The fake clientset does not honour DryRun, so check that every
	// delete request carried it.
	deletes := 0
	for _, a := range cs.Actions() {
		if d, ok := a.(interface{ GetDeleteOptions() metav1.DeleteOptions }); ok {
			deletes++
			if len(d.GetDeleteOptions().DryRun) == 0 {
				t.Errorf("delete of %s sent without dryRun", a.GetResource().Resource)
			}
		}
	}
	if deletes == 0 {
		t.Fatal("no delete request seen")
	}
}
