package sweep

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
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
		m.Labels = map[string]string{labels.ManagedBy: labels.Manager}
	}
	return m
}

func record(name string, phase traceflow.Phase) traceflow.Traceflow {
	return traceflow.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now)},
		Spec: traceflow.Spec{Timeout: 20}, Status: traceflow.Status{Phase: phase}}
}

// now is the API server's clock in these tests.
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// claim is trace's Lease on tag, made age ago for dur seconds.
func claim(tag uint8, trace string, age time.Duration, dur int32) *coordinationv1.Lease {
	m := meta("traceflow-system", tagalloc.LeaseName(tag), true)
	m.Labels[labels.Trace] = trace
	m.CreationTimestamp = metav1.NewTime(now.Add(-age))
	m.UID = types.UID(trace)
	return &coordinationv1.Lease{ObjectMeta: m, Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &dur}}
}

// helper is a helper pod of trace on tag, created age ago.
func helper(name, trace string, tag string, age time.Duration) *corev1.Pod {
	m := meta("traceflow-system", name, true)
	m.Labels[labels.Trace] = trace
	m.Annotations = map[string]string{labels.TagAnnotation: tag}
	m.CreationTimestamp = metav1.NewTime(now.Add(-age))
	return &corev1.Pod{ObjectMeta: m, Spec: corev1.PodSpec{ActiveDeadlineSeconds: ptr.To(int64(80))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func names(cs *fake.Clientset) (pods, leases []string) {
	pl, _ := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	for _, p := range pl.Items {
		pods = append(pods, p.Name)
	}
	ll, _ := cs.CoordinationV1().Leases("").List(context.Background(), metav1.ListOptions{})
	for _, l := range ll.Items {
		leases = append(leases, l.Name)
	}
	sort.Strings(pods)
	sort.Strings(leases)
	return pods, leases
}

// Another user's trace running right now keeps its pods, claim and record;
// what is stale goes; what is not ours is never touched.
func TestSweepSparesLiveTraces(t *testing.T) {
	cs := fake.NewClientset(
		claim(7, "running", 5*time.Second, 80), helper("running-sender", "running", "7", 4*time.Second),
		claim(11, "killed", 2*time.Minute, 80), helper("killed-sender", "killed", "11", 2*time.Minute),
		helper("orphan-receiver", "gone", "15", 10*time.Second), // its trace released its claim
		helper("impostor", "other", "7", 3*time.Second),         // tag 7 is held by another trace
		helper("overdue", "running", "7", 90*time.Second),       // past activeDeadlineSeconds
		&corev1.Pod{ObjectMeta: meta("traceflow-system", "not-ours", false)},
		&coordinationv1.Lease{ObjectMeta: meta("kube-system", "kube-scheduler", false)},
	)
	old := record("killed", traceflow.PhaseRunning)
	old.CreationTimestamp = metav1.NewTime(now.Add(-2 * time.Minute))
	recs := &fakeRecords{items: map[string]traceflow.Traceflow{
		"running": record("running", traceflow.PhaseRunning), "killed": old,
		"kept-done": record("kept-done", traceflow.PhaseSucceeded),
	}}
	got, err := Sweep(context.Background(), cs, recs, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	pods, leases := names(cs)
	if want := []string{"not-ours", "running-sender"}; !slices.Equal(pods, want) {
		t.Errorf("pods left %v, want %v (removed %v)", pods, want, got.Pods)
	}
	if want := []string{"kube-scheduler", tagalloc.LeaseName(7)}; !slices.Equal(leases, want) {
		t.Errorf("leases left %v, want %v", leases, want)
	}
	if _, ok := recs.items["running"]; !ok || len(recs.items) != 2 {
		t.Errorf("records left %v, want running and kept-done", recs.items)
	}
	if got.Live != 3 { // the claim, the pod and the record of "running"
		t.Errorf("live %d, want 3", got.Live)
	}

	got, err = Sweep(context.Background(), cs, recs, Options{Now: now, Force: true, AllRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	pods, leases = names(cs)
	if !slices.Equal(pods, []string{"not-ours"}) || !slices.Equal(leases, []string{"kube-scheduler"}) || len(recs.items) != 0 || got.Live != 0 {
		t.Errorf("--force --all-records left pods %v leases %v records %v", pods, leases, recs.items)
	}
}

func TestSweepOneTrace(t *testing.T) {
	cs := fake.NewClientset(claim(7, "a", time.Second, 80), helper("a-sender", "a", "7", time.Second),
		claim(11, "b", time.Second, 80), helper("b-sender", "b", "11", time.Second))
	recs := &fakeRecords{items: map[string]traceflow.Traceflow{"a": record("a", traceflow.PhaseRunning), "b": record("b", traceflow.PhaseRunning)}}
	if _, err := Sweep(context.Background(), cs, recs, Options{Now: now, Force: true, Traces: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	pods, leases := names(cs)
	if !slices.Equal(pods, []string{"b-sender"}) || !slices.Equal(leases, []string{tagalloc.LeaseName(11)}) || len(recs.items) != 1 {
		t.Errorf("--trace a left pods %v leases %v records %v", pods, leases, recs.items)
	}
}

func TestSweepDryRunDeletesNothing(t *testing.T) {
	cs := fake.NewClientset(helper("tf-x-sender-abc", "x", "7", 5*time.Minute))
	old := record("r", traceflow.PhaseRunning)
	old.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	recs := &fakeRecords{items: map[string]traceflow.Traceflow{"r": old}}
	got, err := Sweep(context.Background(), cs, recs, Options{DryRun: true, Now: now})
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
