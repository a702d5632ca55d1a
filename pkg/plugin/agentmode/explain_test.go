package agentmode

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// namer is a DropExplainer that names every drop it is asked about, and
// records what it was asked.
type namer struct {
	mu    sync.Mutex
	asked []report.Observation
	// before are the hops it was given before each drop.
	before [][]outcome.TimedHop
}

func (n *namer) ExplainDrop(_ context.Context, hops []outcome.TimedHop, o report.Observation) report.Observation {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked = append(n.asked, o)
	n.before = append(n.before, hops)
	o.NetworkPolicy, o.NetworkPolicyRule = "default/deny-locked", "ingress default deny: no ingress rule allows TCP 80 from default/a"
	return o
}

func runExplained(t *testing.T, f *fakeServer, x outcome.DropExplainer) (Outcome, *outcome.Model, []outcome.Update) {
	t.Helper()
	var mu sync.Mutex
	m := &outcome.Model{}
	var updates []outcome.Update
	r := &Runner{Records: f, Now: time.Now, Slack: 50 * time.Millisecond, SourceNode: "tf-node-1", Explainer: x, Emit: func(u outcome.Update) {
		mu.Lock()
		m.Apply(u)
		updates = append(updates, u)
		mu.Unlock()
	}}
	tf := &traceflow.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "tf"}, Spec: traceflow.Spec{Timeout: 20}}
	out, err := r.Run(context.Background(), tf, outcome.TraceStarted{Name: "tf", Engine: "agent", DestinationKind: outcome.DestinationPod}, false)
	if err != nil {
		t.Fatal(err)
	}
	return out, m, updates
}

// A Kubernetes NetworkPolicy's default deny, which Antrea names nowhere
// (its IngressDefaultRule drop carries no networkPolicy): the plugin's
// explainer names it, in the hop shown and in the hop that decided the
// verdict, so the reason, -o json and JUnit all carry it.
func TestAgentDefaultDenyExplained(t *testing.T) {
	s := statuses(t, "recorded-sender-missing-timeout.json")
	x := &namer{}
	out, m, _ := runExplained(t, newFakeServer(writes(s)...), x)
	if out.Verdict != outcome.Dropped || out.Decided == nil {
		t.Fatalf("verdict %s decided %+v", out.Verdict, out.Decided)
	}
	if len(x.asked) != 1 || x.asked[0].ComponentInfo != "IngressDefaultRule" {
		t.Fatalf("the explainer was asked about %+v, want the one IngressDefaultRule drop", x.asked)
	}
	if got := out.Decided.Observation.NetworkPolicy; got != "default/deny-locked" {
		t.Errorf("decided hop names %q", got)
	}
	if !strings.Contains(out.Reason, "NetworkPolicy default/deny-locked rule ingress default deny") {
		t.Errorf("reason %q does not name the policy and why", out.Reason)
	}
	hops := m.AllHops()
	if last := hops[len(hops)-1].Observation; last.NetworkPolicy != "default/deny-locked" {
		t.Errorf("the hop shown names %q", last.NetworkPolicy)
	}
}

// A drop Antrea names (an Antrea-native policy's rule) is Antrea's word:
// the explainer is not asked, and the name is Antrea's.
func TestAgentNamedDropNotExplained(t *testing.T) {
	x := &namer{}
	out, _, _ := runExplained(t, newFakeServer(writes(statuses(t, "antrea-acnp-drop.json"))...), x)
	if len(x.asked) != 0 {
		t.Errorf("the explainer was asked about a drop Antrea named: %+v", x.asked)
	}
	if !strings.Contains(out.Reason, "AntreaClusterNetworkPolicy:deny-b") {
		t.Errorf("reason %q", out.Reason)
	}
}

// Antrea's receiver often writes first: its hops are shown after the
// sender's and after the injection, never before them, and the explainer
// of a receiver's drop sees the sender's hops before it.
func TestAgentReceiverFirstShownAfterSender(t *testing.T) {
	s := statuses(t, "antrea-inter-node.json")
	_, m, updates := runExplained(t, newFakeServer(writes(s)...), &namer{})
	injected := -1
	for i, u := range updates {
		switch u := u.(type) {
		case outcome.Injected:
			injected = i
		case outcome.Observed:
			if u.Hop.Role == report.RoleReceiver && injected < 0 {
				t.Fatalf("receiver hop %d shown before the injection: %+v", i, u.Hop)
			}
			if u.Hop.Role == report.RoleReceiver {
				for _, v := range updates[i+1:] {
					if o, ok := v.(outcome.Observed); ok && o.Hop.Role == report.RoleSender {
						t.Fatalf("a sender hop shown after a receiver's: %+v", o.Hop)
					}
				}
			}
		}
	}
	if injected < 0 {
		t.Fatal("no injection")
	}
	if got, want := pathOf(m), "tf-node-1(Sender) -> tf-node-2(Receiver)"; got != want {
		t.Errorf("path %s", got)
	}
}

// A receiver's result with no sender's at all (Antrea lost it) is held
// back only until the trace ends: then it is shown, and decides.
func TestAgentReceiverAloneShownAtTheEnd(t *testing.T) {
	s := statuses(t, "recorded-sender-missing-timeout.json")
	out, m, _ := runExplained(t, newFakeServer(writes(s)...), nil)
	if hops := m.AllHops(); len(hops) != 2 || hops[1].Observation.Action != report.ActionDropped {
		t.Fatalf("hops %+v", hops)
	}
	if out.Verdict != outcome.Dropped || !strings.Contains(out.Reason, "the sender's hops are missing") {
		t.Errorf("verdict %s, reason %q", out.Verdict, out.Reason)
	}
}
