package agentmode

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

func run(t *testing.T, f *fakeServer, timeout int32, keep bool) (Outcome, *outcome.Model, error) {
	t.Helper()
	var mu sync.Mutex
	m := &outcome.Model{}
	r := &Runner{Records: f, Now: time.Now, Slack: 50 * time.Millisecond, SourceNode: "tf-node-1", Emit: func(u outcome.Update) {
		mu.Lock()
		m.Apply(u)
		mu.Unlock()
	}}
	tf := &traceflow.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "tf"}, Spec: traceflow.Spec{Timeout: timeout}}
	out, err := r.Run(context.Background(), tf, outcome.TraceStarted{Name: "tf", Engine: "agent", Source: "default/a", Destination: "default/b", DestinationKind: outcome.DestinationPod}, keep)
	return out, m, err
}

// statuses loads a sequence of Traceflow statuses from testdata.
func statuses(t *testing.T, file string) []traceflow.Status {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var s []traceflow.Status
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func writes(s []traceflow.Status) []step {
	out := make([]step, len(s))
	for i := range s {
		out[i] = step{status: &s[i]}
	}
	return out
}

// pathOf is the path as the summary prints it: the nodes, sender first.
func pathOf(m *outcome.Model) string {
	var names []string
	for _, n := range m.Nodes {
		names = append(names, n.Name+"("+string(n.Role)+")")
	}
	return strings.Join(names, " -> ")
}

// Real Antrea's inter-node trace: no roles, the receiver's result first,
// the tag gone at Succeeded, the receiver's first observation without
// componentInfo and Delivered without a pod.
func TestAntreaInterNodeShapes(t *testing.T) {
	f := newFakeServer(writes(statuses(t, "antrea-inter-node.json"))...)
	out, m, err := run(t, f, 20, false)
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("verdict %s, err %v", out.Verdict, err)
	}
	if got, want := pathOf(m), "tf-node-1(Sender) -> tf-node-2(Receiver)"; got != want {
		t.Errorf("path %s, want %s", got, want)
	}
	if hops := m.AllHops(); len(hops) != 6 || hops[0].Observation.Component != report.ComponentSpoofGuard || hops[len(hops)-1].Observation.Action != report.ActionDelivered {
		t.Errorf("hops not in path order, each once: %+v", hops)
	}
	if m.Trace.Tag != 3 {
		t.Errorf("the dataplane tag Antrea removed at Succeeded must be kept: %d", m.Trace.Tag)
	}
	if out.Decided == nil || out.Decided.Node != "tf-node-2" || out.Reason != "delivered on tf-node-2" {
		t.Errorf("decided at %+v, reason %q", out.Decided, out.Reason)
	}
	summary := view.Summary(m, outcome.ExpectDelivered, false)
	if !strings.Contains(summary, "via tf-node-1 -> tf-node-2") {
		t.Errorf("summary prints the path backwards: %s", summary)
	}
	if !f.deleted {
		t.Error("Traceflow not deleted without --keep")
	}
	if len(f.watchRVs) != 1 || f.watchRVs[0] != "1" {
		t.Errorf("watched from %v; want once, from the creation's resourceVersion 1", f.watchRVs)
	}
}

// The sender is told by its observations, wherever the source pod's node
// is said to be: a trace whose source node is unknown still prints the
// sender first.
func TestSenderFromObservations(t *testing.T) {
	f := newFakeServer(writes(statuses(t, "antrea-inter-node.json"))...)
	m := &outcome.Model{}
	var mu sync.Mutex
	r := &Runner{Records: f, Now: time.Now, Slack: 50 * time.Millisecond, Emit: func(u outcome.Update) { mu.Lock(); m.Apply(u); mu.Unlock() }}
	_, err := r.Run(context.Background(), &traceflow.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "tf"}, Spec: traceflow.Spec{Timeout: 20}}, outcome.TraceStarted{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pathOf(m), "tf-node-1(Sender) -> tf-node-2(Receiver)"; got != want {
		t.Errorf("path %s, want %s", got, want)
	}
}

func TestAntreaPolicyDrop(t *testing.T) {
	out, m, err := run(t, newFakeServer(writes(statuses(t, "antrea-acnp-drop.json"))...), 20, false)
	if err != nil || out.Verdict != outcome.Dropped {
		t.Fatalf("verdict %s, err %v", out.Verdict, err)
	}
	if !strings.Contains(out.Reason, "AntreaClusterNetworkPolicy:deny-b") || !strings.Contains(out.Reason, "rule drop-80") {
		t.Errorf("the drop must name the policy and rule: %q", out.Reason)
	}
	if pathOf(m) != "tf-node-1(Sender)" {
		t.Errorf("path %s", pathOf(m))
	}
}

// Watches that end early are resumed from a fresh list, and no status
// written meanwhile is lost: each observation is shown once, in order.
func TestWatchResumed(t *testing.T) {
	s := statuses(t, "antrea-inter-node.json")
	for _, tc := range []struct {
		name   string
		script []step
		relist int
	}{
		{"410 Gone mid-trace", []step{{status: &s[0]}, {endWatch: errGone}, {status: &s[1]}, {status: &s[2]}, {status: &s[3]}}, 1},
		{"too large resource version (etcd without progress notifications)", []step{{status: &s[0]}, {endWatch: errTooLarge}, {status: &s[1]}, {endWatch: errTooLarge}, {status: &s[2]}, {status: &s[3]}}, 2},
		{"the watch refused twice, then served", []step{{refuse: errTooLarge, refuseN: 2}, {closeOnly: true}, {status: &s[0], await: true}, {status: &s[1]}, {status: &s[2]}, {status: &s[3]}}, 3},
		{"closed by the API server", []step{{status: &s[0]}, {status: &s[1]}, {closeOnly: true}, {status: &s[2]}, {status: &s[3]}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(tc.script...)
			out, m, err := run(t, f, 20, false)
			if err != nil || out.Verdict != outcome.Delivered {
				t.Fatalf("verdict %s, err %v", out.Verdict, err)
			}
			if hops := m.AllHops(); len(hops) != 6 {
				t.Errorf("%d hops, want each of the 6 observations once", len(hops))
			}
			if out.Resumed != tc.relist || f.relists != tc.relist {
				t.Errorf("resumed %d, relisted %d; want %d (watched from %v)", out.Resumed, f.relists, tc.relist, f.watchRVs)
			}
			if got, want := pathOf(m), "tf-node-1(Sender) -> tf-node-2(Receiver)"; got != want {
				t.Errorf("path %s, want %s", got, want)
			}
		})
	}
}

func TestWatchNotResumable(t *testing.T) {
	out, _, err := run(t, newFakeServer(step{endWatch: errForbidden}), 20, false)
	if out.Verdict != outcome.Failed || exitcode.Of(err) != exitcode.Setup {
		t.Fatalf("a forbidden watch must fail the trace (exit 4): %s %v", out.Verdict, err)
	}
}

func TestAgentKeep(t *testing.T) {
	s := statuses(t, "antrea-inter-node.json")
	f := newFakeServer(writes(s)...)
	_, _, err := run(t, f, 20, true)
	if err != nil || f.deleted {
		t.Fatalf("--keep: err %v deleted %v", err, f.deleted)
	}
}

func TestAgentOldActionNameIsNetwork(t *testing.T) {
	left := traceflow.Status{Phase: traceflow.PhaseSucceeded, Results: []report.NodeResult{{Node: "tf-node-1", Observations: []report.Observation{
		{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded},
		{Component: report.ComponentForwarding, Action: report.ActionForwardedOutOfOverlay}}}}}
	out, _, err := run(t, newFakeServer(step{status: &left}), 20, false)
	if err != nil || out.Verdict != outcome.ForwardedOutOfNetwork {
		t.Fatalf("ForwardedOutOfOverlay must read as ForwardedOutOfNetwork: %s %v", out.Verdict, err)
	}
}

func TestAgentFailures(t *testing.T) {
	running := traceflow.Status{Phase: traceflow.PhaseRunning}
	for _, tc := range []struct {
		name    string
		script  []step
		verdict outcome.Verdict
		code    exitcode.Code
		msg     string
	}{
		{"antrea timeout", []step{{status: &running}, {status: &traceflow.Status{Phase: traceflow.PhaseFailed, Reason: "Traceflow timeout"}}}, outcome.Incomplete, exitcode.Timeout, ""},
		{"other failure", []step{{status: &traceflow.Status{Phase: traceflow.PhaseFailed, Reason: "Invalid destination"}}}, outcome.Failed, exitcode.Setup, "Invalid destination"},
		{"never started: tags exhausted", nil, outcome.Failed, exitcode.Setup, "dataplane tags"},
		{"running, never finished", []step{{status: &running}}, outcome.Incomplete, exitcode.Timeout, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(tc.script...)
			out, _, err := run(t, f, 1, false)
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

// Antrea timed the trace out because the sender's result never came, but
// the receiver's agent saw the drop: the verdict is the drop it saw, and the
// reason says whose part is missing. A timed-out trace whose hops end
// nowhere stays Incomplete.
func TestAgentTimeoutAfterAnEndWasSeen(t *testing.T) {
	s := statuses(t, "recorded-sender-missing-timeout.json")
	out, m, err := run(t, newFakeServer(writes(s)...), 1, false)
	if err != nil || out.Verdict != outcome.Dropped {
		t.Fatalf("verdict %s, err %v; want Dropped, seen by the receiver", out.Verdict, err)
	}
	if out.Decided == nil || out.Decided.Node != "tf-node-2" || out.Decided.TableName != "IngressDefaultRule" {
		t.Errorf("decided at %+v, want tf-node-2's IngressDefaultRule", out.Decided)
	}
	for _, want := range []string{"dropped on tf-node-2 by table IngressDefaultRule", "sender's hops are missing", `"Traceflow timeout"`, "agent on tf-node-1"} {
		if !strings.Contains(out.Reason, want) {
			t.Errorf("reason %q does not say %q", out.Reason, want)
		}
	}
	if code, _ := outcome.ExitCode(out.Verdict, outcome.ExpectDelivered, outcome.DestinationPod); code != exitcode.Verdict {
		t.Errorf("exit %d, want %d", code, exitcode.Verdict)
	}
	if pathOf(m) != "tf-node-2(Receiver)" {
		t.Errorf("path %s", pathOf(m))
	}

	// The same timeout where the receiver saw only the packet arrive.
	arrived := s[1]
	arrived.Results = []report.NodeResult{s[1].Results[0]}
	arrived.Results[0].Observations = arrived.Results[0].Observations[:1]
	failed := arrived
	failed.Phase, failed.Reason = traceflow.PhaseFailed, "Traceflow timeout"
	out, _, err = run(t, newFakeServer(step{status: &s[0]}, step{status: &arrived}, step{status: &failed}), 1, false)
	if err != nil || out.Verdict != outcome.Incomplete || out.Decided != nil {
		t.Errorf("verdict %s decided %+v err %v; want Incomplete, decided nowhere", out.Verdict, out.Decided, err)
	}
	if !strings.Contains(out.Reason, "only the agent on tf-node-2 reported") {
		t.Errorf("the reason does not say whose result came: %q", out.Reason)
	}
}

// A status whose result list shrinks (rewritten by another writer, or an
// older object from a relist) neither panics nor shows a hop twice.
func TestAgentShrinkingResults(t *testing.T) {
	s := statuses(t, "antrea-inter-node.json")
	full := s[3]
	shorter := full
	shorter.Phase = traceflow.PhaseRunning
	shorter.Results = []report.NodeResult{full.Results[0]}
	shorter.Results[0].Observations = shorter.Results[0].Observations[:1]
	out, m, err := run(t, newFakeServer(step{status: &s[2]}, step{status: &shorter}, step{status: &full}), 20, false)
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("%s %v", out.Verdict, err)
	}
	if hops := m.AllHops(); len(hops) != 6 {
		t.Errorf("got %d hops, want each of the 6 observations once", len(hops))
	}
}

// Statuses recorded from the real Antrea in the lab (see testdata/README.md).
func TestRecordedAntreaStatuses(t *testing.T) {
	for _, tc := range []struct {
		file, path string
		hops       int
	}{
		{"recorded-inter-node-succeeded.json", "tf-node-1(Sender) -> tf-node-2(Receiver)", 4},
		{"recorded-intra-node-succeeded.json", "tf-node-1(Sender)", 2},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			var st traceflow.Status
			if err := json.Unmarshal(b, &st); err != nil {
				t.Fatal(err)
			}
			// Running with a tag first, as Antrea writes before results.
			running := traceflow.Status{Phase: traceflow.PhaseRunning, DataplaneTag: 1, StartTime: st.StartTime}
			out, m, err := run(t, newFakeServer(step{status: &running}, step{status: &st}), 20, false)
			if err != nil || out.Verdict != outcome.Delivered {
				t.Fatalf("verdict %s, err %v", out.Verdict, err)
			}
			if got := pathOf(m); got != tc.path {
				t.Errorf("path %s, want %s", got, tc.path)
			}
			if hops := m.AllHops(); len(hops) != tc.hops || hops[0].Observation.Component != report.ComponentSpoofGuard {
				t.Errorf("hops %+v", hops)
			}
		})
	}
}
