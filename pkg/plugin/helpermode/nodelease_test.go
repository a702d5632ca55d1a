package helpermode

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

func nodeLease(renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
		LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: ptr.To(metav1.NewMicroTime(renewed)),
	}}
}

func TestLeaseVerdict(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		lease     *coordinationv1.Lease
		stale     bool
		wantUntil time.Duration
	}{
		{"just renewed", nodeLease(now), false, 20 * time.Second},
		{"one renewal missed", nodeLease(now.Add(-15 * time.Second)), false, 5 * time.Second},
		{"half its duration", nodeLease(now.Add(-20 * time.Second)), false, 0},
		{"two renewals missed", nodeLease(now.Add(-21 * time.Second)), true, 0},
		{"no duration: the kubelet's default", &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-25 * time.Second)))}}, true, 0},
		{"never renewed", &coordinationv1.Lease{}, false, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stale, until := leaseVerdict(tc.lease, now)
			if stale != tc.stale || until != tc.wantUntil {
				t.Errorf("stale %v, until %s; want %v, %s", stale, until, tc.stale, tc.wantUntil)
			}
		})
	}
}

// A receiver node whose kubelet stopped: its helper pod stays Pending
// without a word, and the trace fails naming the node long before its
// timeout, judged by the server's clock (here a day ahead of the local
// one: the local clock would call the Lease fresh).
func TestStoppedKubeletFailsNamingTheNode(t *testing.T) {
	serverNow := time.Now().Add(24 * time.Hour)
	h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
		if p.Spec.NodeName == "n1" {
			f.run(p)
		}
		// On n2 nothing happens: no kubelet picks the pod up.
	})
	var reads atomic.Int32
	h.runner.ServerNow = func() (time.Time, bool) { return serverNow, true }
	h.runner.LeaseConfirm = 300 * time.Millisecond
	h.runner.NodeLease = func(_ context.Context, node string) (*coordinationv1.Lease, error) {
		reads.Add(1)
		if node == "n2" {
			return nodeLease(serverNow.Add(-30 * time.Second)), nil
		}
		return nodeLease(serverNow), nil
	}
	c := cfg()
	c.Timeout = 30 * time.Second
	start := time.Now()
	out, err := h.runner.Run(context.Background(), c, plan("n2"))
	if exitcode.Of(err) != exitcode.Setup || out.Verdict != outcome.Failed {
		t.Fatalf("want a setup failure, got %v (%s)", err, out.Verdict)
	}
	for _, want := range []string{"node n2", "kubelet", "kube-node-lease/n2", "30s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// A setup failure (not exit 3, the trace's timeout) is what says the
	// Lease, not the 30 s timeout, ended the trace; only the lower bound is
	// timed, and a slow machine cannot make it fail.
	if d := time.Since(start); d < h.runner.LeaseConfirm {
		t.Errorf("took %s: the stale Lease should end the trace only once it stayed unrenewed for %s", d, h.runner.LeaseConfirm)
	}
	if len(h.cluster.deleted) != 1 || h.leases(t) != 0 {
		t.Errorf("left behind: deleted=%v leases=%d", h.cluster.deleted, h.leases(t))
	}
}

// A kubelet that renews in time re-arms the check: the Lease is read
// again only when it would have gone stale, not in a loop.
func TestRenewedLeaseRearms(t *testing.T) {
	var reads atomic.Int32
	renewed := make(chan struct{})
	tr := &tracer{r: &Runner{Now: time.Now}}
	start := time.Now()
	tr.r.NodeLease = func(_ context.Context, _ string) (*coordinationv1.Lease, error) {
		switch reads.Add(1) {
		case 1: // stale in 1 s
			return nodeLease(time.Now().Add(-19 * time.Second)), nil
		default: // renewed meanwhile
			close(renewed)
			return nodeLease(time.Now()), nil
		}
	}
	down := watchUntil(t, tr, renewed, 10*time.Second, "the Lease was not read again when it would have gone stale")
	if d := time.Since(start); d < time.Second {
		t.Errorf("read again after %s, before the Lease could be stale", d)
	}
	select {
	case d := <-down:
		t.Fatalf("a renewed Lease called the node down: %+v", d)
	case <-time.After(500 * time.Millisecond):
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2", n)
	}
}

// An API server that was away: every Lease is stale when it answers again,
// and each kubelet renews within one period. A stale Lease renewed before
// the second look is no stopped kubelet.
func TestStaleLeaseRenewedBeforeTheSecondLook(t *testing.T) {
	var reads atomic.Int32
	second := make(chan struct{})
	tr := &tracer{r: &Runner{Now: time.Now, LeaseConfirm: 200 * time.Millisecond}}
	start := time.Now()
	tr.r.NodeLease = func(_ context.Context, _ string) (*coordinationv1.Lease, error) {
		switch reads.Add(1) {
		case 1: // 22 s old: the API server just came back
			return nodeLease(time.Now().Add(-22 * time.Second)), nil
		case 2: // the kubelet got through
			close(second)
			return nodeLease(time.Now()), nil
		}
		return nodeLease(time.Now()), nil
	}
	down := watchUntil(t, tr, second, 5*time.Second, "no second look")
	if d := time.Since(start); d < tr.r.LeaseConfirm {
		t.Errorf("second look after %s, before LeaseConfirm %s", d, tr.r.LeaseConfirm)
	}
	select {
	case d := <-down:
		t.Fatalf("a Lease renewed before the second look called the node down: %+v", d)
	case <-time.After(500 * time.Millisecond):
	}
}

// watchUntil watches node n2's kubelet with tr until read is closed (the
// read the test waits for), failing if the node is called down first or
// read does not come within wait; it returns the channel on which a later
// down would come. The watch ends with the test.
func watchUntil(t *testing.T, tr *tracer, read <-chan struct{}, wait time.Duration, missing string) <-chan nodeDown {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	down := make(chan nodeDown, 1)
	go tr.watchNode(ctx, "n2", down)
	select {
	case <-read:
	case d := <-down:
		t.Fatalf("called down before the read: %+v", d)
	case <-time.After(wait):
		t.Fatal(missing)
	}
	return down
}

// A kubelet that stops during the trace, while the API server answers: its
// Lease is called down at the read where it is stale, with no second look,
// since the API server has been answering longer than LeaseConfirm.
func TestLeaseStaleAfterTheAPIServerAnsweredLongEnough(t *testing.T) {
	var reads atomic.Int32
	last := time.Now().Add(-20*time.Second + 500*time.Millisecond) // stale in 0.5 s
	tr := &tracer{r: &Runner{Now: time.Now, LeaseConfirm: 300 * time.Millisecond}}
	tr.r.NodeLease = func(_ context.Context, _ string) (*coordinationv1.Lease, error) {
		reads.Add(1)
		return nodeLease(last), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	down := make(chan nodeDown, 1)
	go tr.watchNode(ctx, "n2", down)
	select {
	case d := <-down:
		if d.node != "n2" || d.age <= 20*time.Second {
			t.Errorf("down %+v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stale Lease was not called down")
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2: the one before it went stale, and the one that found it stale", n)
	}
}
