package agentmode

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// fakeAntrea is a traceflow.Client whose watch replays what Antrea's
// controller would write after the object is created.
type fakeAntrea struct {
	mu       sync.Mutex
	w        *watch.FakeWatcher
	statuses []traceflow.Status
	created  bool
	deleted  bool
}

func (f *fakeAntrea) Create(_ context.Context, tf *traceflow.Traceflow) (*traceflow.Traceflow, error) {
	f.mu.Lock()
	f.created = true
	f.mu.Unlock()
	go func() {
		for _, s := range f.statuses {
			c := *tf
			c.Status = s
			u, err := traceflow.ToUnstructured(&c)
			if err != nil {
				panic(err)
			}
			f.w.Modify(u)
		}
	}()
	return tf, nil
}
func (f *fakeAntrea) Get(context.Context, string) (*traceflow.Traceflow, error) { return nil, nil }
func (f *fakeAntrea) UpdateStatus(context.Context, *traceflow.Traceflow) (*traceflow.Traceflow, error) {
	return nil, nil
}
func (f *fakeAntrea) Delete(context.Context, string) error {
	f.mu.Lock()
	f.deleted = true
	f.mu.Unlock()
	return nil
}
func (f *fakeAntrea) List(context.Context, string) ([]traceflow.Traceflow, error) { return nil, nil }
func (f *fakeAntrea) Watch(context.Context, string) (watch.Interface, error)      { return f.w, nil }

func run(t *testing.T, statuses []traceflow.Status, timeout int32, keep bool) (Outcome, *fakeAntrea, []outcome.Update, error) {
	t.Helper()
	f := &fakeAntrea{w: watch.NewFakeWithChanSize(10, false), statuses: statuses}
	var mu sync.Mutex
	var updates []outcome.Update
	r := &Runner{Records: f, Now: time.Now, Slack: 50 * time.Millisecond, Emit: func(u outcome.Update) {
		mu.Lock()
		updates = append(updates, u)
		mu.Unlock()
	}}
	tf := &traceflow.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "tf"}, Spec: traceflow.Spec{Timeout: timeout}}
	out, err := r.Run(context.Background(), tf, outcome.TraceStarted{Name: "tf", Engine: "agent"}, keep)
	return out, f, updates, err
}

var (
	senderFwd = report.NodeResult{Node: "n1", Role: report.RoleSender, Observations: []report.Observation{
		{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded},
		{Component: report.ComponentForwarding, Action: report.ActionForwarded, TunnelDstIP: "192.168.77.12"}}}
	receiverDelivered = report.NodeResult{Node: "n2", Role: report.RoleReceiver, Observations: []report.Observation{
		{Component: report.ComponentForwarding, Action: report.ActionReceived},
		{Component: report.ComponentForwarding, Action: report.ActionDelivered, Pod: "default/pod-b"}}}
	senderLeft = report.NodeResult{Node: "n1", Role: report.RoleSender, Observations: []report.Observation{
		{Component: report.ComponentForwarding, Action: report.ActionForwardedOutOfOverlay}}}
)

func TestAgentSucceededInterNode(t *testing.T) {
	out, f, updates, err := run(t, []traceflow.Status{
		{Phase: traceflow.PhaseRunning, DataplaneTag: 7},
		{Phase: traceflow.PhaseRunning, DataplaneTag: 7, Results: []report.NodeResult{senderFwd}},
		{Phase: traceflow.PhaseSucceeded, DataplaneTag: 7, Results: []report.NodeResult{senderFwd, receiverDelivered}},
	}, 20, false)
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("%s %v", out.Verdict, err)
	}
	m := &outcome.Model{}
	for _, u := range updates {
		m.Apply(u)
	}
	if hops := m.AllHops(); len(hops) != 4 {
		t.Fatalf("each observation must be shown once: got %d hops", len(hops))
	}
	if !f.deleted {
		t.Error("Traceflow not deleted without --keep")
	}
}

func TestAgentKeep(t *testing.T) {
	_, f, _, err := run(t, []traceflow.Status{{Phase: traceflow.PhaseSucceeded, Results: []report.NodeResult{senderLeft}}}, 20, true)
	if err != nil || f.deleted {
		t.Fatalf("--keep: err %v deleted %v", err, f.deleted)
	}
}

func TestAgentOldActionNameIsNetwork(t *testing.T) {
	out, _, _, err := run(t, []traceflow.Status{{Phase: traceflow.PhaseSucceeded, Results: []report.NodeResult{senderLeft}}}, 20, false)
	if err != nil || out.Verdict != outcome.ForwardedOutOfNetwork {
		t.Fatalf("ForwardedOutOfOverlay must read as ForwardedOutOfNetwork: %s %v", out.Verdict, err)
	}
}

func TestAgentFailures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []traceflow.Status
		verdict  outcome.Verdict
		code     exitcode.Code
		msg      string
	}{
		{"antrea timeout", []traceflow.Status{{Phase: traceflow.PhaseRunning}, {Phase: traceflow.PhaseFailed, Reason: "Traceflow timeout"}}, outcome.Incomplete, exitcode.Timeout, ""},
		{"other failure", []traceflow.Status{{Phase: traceflow.PhaseFailed, Reason: "Invalid destination"}}, outcome.Failed, exitcode.Setup, "Invalid destination"},
		{"never started: tags exhausted", nil, outcome.Failed, exitcode.Setup, "dataplane tags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, f, _, err := run(t, tc.statuses, 1, false)
			if out.Verdict != tc.verdict {
				t.Fatalf("verdict %s, want %s", out.Verdict, tc.verdict)
			}
			code := exitcode.Of(err)
			if err == nil {
				code, _ = outcome.ExitCode(out.Verdict, outcome.ExpectDelivered, outcome.DestinationPod)
			}
			if code != tc.code || (tc.msg != "" && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("exit %d err %v", code, err)
			}
			if !f.deleted {
				t.Error("Traceflow left behind after a failure")
			}
		})
	}
}

// A status whose result list shrinks (rewritten by another writer, or an
// older object from a relisting watch) neither panics nor shows a hop twice.
func TestAgentShrinkingResults(t *testing.T) {
	shorter := receiverDelivered
	shorter.Observations = shorter.Observations[:1]
	out, _, updates, err := run(t, []traceflow.Status{
		{Phase: traceflow.PhaseRunning, DataplaneTag: 7, Results: []report.NodeResult{senderFwd, receiverDelivered}},
		{Phase: traceflow.PhaseRunning, DataplaneTag: 7, Results: []report.NodeResult{senderFwd, shorter}},
		{Phase: traceflow.PhaseRunning, DataplaneTag: 7, Results: []report.NodeResult{shorter}},
		{Phase: traceflow.PhaseSucceeded, DataplaneTag: 7, Results: []report.NodeResult{senderFwd, receiverDelivered}},
	}, 20, false)
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("%s %v", out.Verdict, err)
	}
	m := &outcome.Model{}
	for _, u := range updates {
		m.Apply(u)
	}
	if hops := m.AllHops(); len(hops) != 4 {
		t.Errorf("got %d hops, want each of the 4 observations once", len(hops))
	}
	if out.Decided == nil || out.Decided.Node != "n2" || !strings.Contains(out.Reason, "delivered to default/pod-b on n2") {
		t.Errorf("decided at %+v, reason %q; want the delivery on n2", out.Decided, out.Reason)
	}
}
