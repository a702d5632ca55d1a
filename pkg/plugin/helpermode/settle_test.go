package helpermode

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// waitingReceiver is a trace whose probe is delivered on the sender's
// node while the receiver on n2, ready, still waits with its catch flows
// in place when the verdict is known.
func waitingReceiver(f *fakeCluster, p *corev1.Pod) {
	f.run(p)
	if p.Labels[labels.Role] == string(helperpod.RoleReceiver) {
		r := readyLine(report.RoleReceiver)
		r.Ready.Cookie = "0x7466070000001201"
		f.write(p, r)
		return // waits until stopped
	}
	f.write(p, readyLine(report.RoleSender), obsLine(delivered, 12, "Output", "x"),
		resultLine("n1", report.RoleSender, 0, delivered))
	f.end(p)
}

func warnings(h *harness) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var w []string
	for _, u := range h.updates {
		if x, ok := u.(outcome.Warning); ok {
			w = append(w, x.Node+": "+x.Message)
		}
	}
	return w
}

// The plugin deletes the helper pods only once each running helper has
// said its flows are gone: a receiver still waiting is stopped (SIGTERM
// through a graceful delete) and its cleanup line awaited.
func TestStillWaitingReceiverIsStoppedAndHeardBeforeDelete(t *testing.T) {
	h := newHarness(waitingReceiver)
	// Run ends on the receiver's cleanup line or not at all: a Run that
	// waited out SettleWait would hang, and the guard below only ends that
	// hung wait (it is no limit on how fast Run must be).
	h.runner.SettleWait = time.Hour
	type ran struct {
		out Outcome
		err error
	}
	done := make(chan ran, 1)
	go func() {
		out, err := h.runner.Run(context.Background(), cfg(), plan("n2"))
		done <- ran{out, err}
	}()
	var r ran
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("Run is waiting out SettleWait instead of ending on the receiver's cleanup line")
	}
	out, err := r.out, r.err
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("%s %v", out.Verdict, err)
	}
	f := h.cluster
	f.mu.Lock()
	defer f.mu.Unlock()
	// The sender may still be running when the verdict is known (it is
	// stopped too): at least the receiver's cleanup line, and all of
	// them before the delete.
	if f.stopped != 1 || len(f.deleted) != 1 || f.cleaned < 1 || f.cleanedAtDelete != f.cleaned {
		t.Fatalf("stopped=%d deleted=%d cleanup lines=%d, of which before the delete=%d: want 1, 1, at least 1, all", f.stopped, len(f.deleted), f.cleaned, f.cleanedAtDelete)
	}
	if w := warnings(h); len(w) != 0 {
		t.Errorf("warnings after a clean stop: %q", w)
	}
}

// A helper that does not answer its SIGTERM (a hung process, a node
// gone) is deleted anyway after the wait, and the warning says which
// flows may be left and how to remove them.
func TestUnconfirmedHelperIsDeletedWithAWarning(t *testing.T) {
	h := newHarness(waitingReceiver)
	h.cluster.onStop = func(*fakeCluster, string) {} // the helper never answers
	h.runner.SettleWait = 50 * time.Millisecond
	if _, err := h.runner.Run(context.Background(), cfg(), plan("n2")); err != nil {
		t.Fatal(err)
	}
	if len(h.cluster.deleted) != 1 {
		t.Fatalf("pods not deleted after the wait: %v", h.cluster.deleted)
	}
	w := strings.Join(warnings(h), "\n")
	if !strings.Contains(w, "helper on node n2 did not confirm") || !strings.Contains(w, "ovs-ofctl del-flows br-int cookie=0x7466070000001201/0xffffffffffffff00") {
		t.Fatalf("warnings %q: want one naming n2 and how to remove its flows", w)
	}
}

// A helper whose cleanup found flows still there says so, and so does the
// plugin.
func TestCleanupThatLeftFlowsIsWarned(t *testing.T) {
	h := newHarness(waitingReceiver)
	h.cluster.onStop = func(f *fakeCluster, pod string) {
		for _, p := range f.created {
			if p.Name == pod {
				f.write(p, report.Line{Type: report.TypeCleanup, Cleanup: &report.Cleanup{Cookie: "0x7466070000001201", FlowsLeft: 2, HardTimeout: 5}})
				f.end(p)
			}
		}
	}
	h.runner.SettleWait = time.Minute
	if _, err := h.runner.Run(context.Background(), cfg(), plan("n2")); err != nil {
		t.Fatal(err)
	}
	w := strings.Join(warnings(h), "\n")
	if !strings.Contains(w, "helper on node n2 left 2 flows") {
		t.Fatalf("warnings %q: want one saying n2 left 2 flows", w)
	}
}

// Issue 15: every helper of one trace gets the same random probe mark, and
// another trace gets another (20 random bits: equal by chance once in a
// million).
func TestHelpersShareARandomMarkPerTrace(t *testing.T) {
	marks := func() []string {
		h := newHarness(interNode(t))
		if _, err := h.runner.Run(context.Background(), cfg(), plan("n2")); err != nil {
			t.Fatal(err)
		}
		var m []string
		for _, p := range h.cluster.created {
			args := p.Spec.Containers[0].Args
			i := slices.Index(args, "--mark")
			if i < 0 || i+1 >= len(args) || args[i+1] == "0" {
				t.Fatalf("pod %s args %q: no nonzero --mark", p.Name, args)
			}
			m = append(m, args[i+1])
		}
		return m
	}
	a, b := marks(), marks()
	if len(a) != 2 || a[0] != a[1] || b[0] != b[1] || a[0] == b[0] {
		t.Fatalf("marks of two traces' helpers: %v and %v; want one shared mark per trace, differing between traces", a, b)
	}
}
