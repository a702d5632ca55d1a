package tracer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/antreaagent"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

type fakeRules struct {
	mu    sync.Mutex
	asked []uint32
	err   error
	// hold, where set, keeps every answer back until the lookup's context
	// ends, as an agent too slow for the trace would.
	hold bool
}

func (f *fakeRules) RuleOf(ctx context.Context, conj uint32, _ string) (antreaagent.Rule, error) {
	f.mu.Lock()
	f.asked = append(f.asked, conj)
	err, hold := f.err, f.hold
	f.mu.Unlock()
	if hold {
		<-ctx.Done()
		return antreaagent.Rule{}, fmt.Errorf("asking Antrea's agent: %w", ctx.Err())
	}
	if err != nil {
		return antreaagent.Rule{}, err
	}
	return antreaagent.Rule{Policy: "AntreaClusterNetworkPolicy:deny", Name: "drop-8080"}, nil
}

func (f *fakeRules) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

func TestRuleConj(t *testing.T) {
	for _, tc := range []struct {
		table, flow string
		conj        uint32
		ok          bool
	}{
		{"AntreaPolicyIngressRule", "priority=14499,conj_id=4", 4, true},
		{"IngressMetric", "priority=200,reg0=0x400/0x400,reg3=0x4", 4, true},
		{"IngressMetric", "priority=200,ct_state=-new,ct_label=0x4/0xffffffff", 0, false},
		// reg3 is the rule's id only in a metric table.
		{"L3Forwarding", "priority=200,reg3=0x4", 0, false},
		{"AntreaPolicyIngressRule", "priority=14499,ip,nw_src=10.244.1.2", 0, false},
	} {
		conj, ok := ruleConj(tc.table, tc.flow)
		if conj != tc.conj || ok != tc.ok {
			t.Errorf("%s %s: %d %v; want %d %v", tc.table, tc.flow, conj, ok, tc.conj, tc.ok)
		}
	}
}

func TestNameRule(t *testing.T) {
	hop := func() *report.Hop { return &report.Hop{TableName: "IngressMetric", Flow: "priority=200,reg3=0x4"} }
	newSession := func(f *fakeRules, timeout time.Duration) *session {
		return &session{c: Common{Rules: f, Timeout: timeout, Logf: func(string, ...any) {}}, start: time.Now()}
	}
	f := &fakeRules{}
	s := newSession(f, 20*time.Second)
	o := report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped}
	s.nameRule(context.Background(), &o, hop())
	if o.NetworkPolicy != "AntreaClusterNetworkPolicy:deny" || o.NetworkPolicyRule != "drop-8080" {
		t.Errorf("named %q %q", o.NetworkPolicy, o.NetworkPolicyRule)
	}
	// A second hop through the same rule reads the same lookup.
	o = report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped}
	s.nameRule(context.Background(), &o, &report.Hop{TableName: "AntreaPolicyIngressRule", Flow: "priority=14499,conj_id=4"})
	if o.NetworkPolicyRule != "drop-8080" || f.count() != 1 {
		t.Errorf("named %q after %d lookups, want drop-8080 after 1", o.NetworkPolicyRule, f.count())
	}
	s.stopRules()

	f = &fakeRules{err: errors.New("asking Antrea's agent: connection refused")}
	s = newSession(f, 20*time.Second)
	o = report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped}
	h := hop()
	s.nameRule(context.Background(), &o, h)
	if o.NetworkPolicy != "" || h.PolicyUnknown != f.err.Error() {
		t.Errorf("policy %q, why %q", o.NetworkPolicy, h.PolicyUnknown)
	}
	s.stopRules()

	// Without a namer, or on a hop already named, nothing is asked.
	n := f.count()
	(&session{c: Common{Logf: func(string, ...any) {}}}).nameRule(context.Background(), &o, hop())
	o.NetworkPolicy = "K8sNetworkPolicy:ns/np"
	s.nameRule(context.Background(), &o, hop())
	if f.count() != n {
		t.Errorf("asked %v", f.asked)
	}
}

// An agent slower than the trace: the hop says why its rule has no name, no
// later than three quarters into the trace's time.
func TestNameRuleSlowAgent(t *testing.T) {
	f := &fakeRules{hold: true}
	s := &session{c: Common{Rules: f, Timeout: 400 * time.Millisecond, Logf: func(string, ...any) {}}, start: time.Now()}
	defer s.stopRules()
	o := report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped}
	h := &report.Hop{TableName: "IngressMetric", Flow: "priority=200,reg3=0x4"}
	s.nameRule(context.Background(), &o, h)
	if o.NetworkPolicy != "" || !strings.Contains(h.PolicyUnknown, "no answer from Antrea's agent within") || !strings.Contains(h.PolicyUnknown, "conjunction 4") {
		t.Errorf("policy %q, why %q", o.NetworkPolicy, h.PolicyUnknown)
	}
	if time.Now().Before(s.rulesDeadline()) {
		t.Errorf("gave up before the deadline")
	}
	// The trace itself interrupted: the hop says so, whatever the lookup.
	s2 := &session{c: Common{Rules: &fakeRules{hold: true}, Timeout: time.Minute, Logf: func(string, ...any) {}}, start: time.Now()}
	defer s2.stopRules()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h = &report.Hop{TableName: "IngressMetric", Flow: "priority=200,reg3=0x4"}
	s2.nameRule(ctx, &o, h)
	if !strings.Contains(h.PolicyUnknown, "the trace ended before") {
		t.Errorf("why %q", h.PolicyUnknown)
	}
}

// A trace from OVS that passes a rule starts its lookup before any hop is
// reported: the agent gets the whole time the probe takes.
func TestWarmRules(t *testing.T) {
	f := &fakeRules{}
	s := &session{c: Common{Rules: f, Timeout: 20 * time.Second, Logf: func(string, ...any) {}}, start: time.Now(), names: TableNames{3: "AntreaPolicyIngressRule", 4: "IngressMetric"}}
	defer s.stopRules()
	s.warmRules(ofproto.Trace{Hops: []ofproto.Hop{
		{Table: 3, Match: "priority=14499,conj_id=7"},
		{Table: 4, Match: "priority=200,reg3=0x7"},
		{Table: 4, NoMatch: true},
		{Table: 3, Match: "priority=14000,conj_id=9"},
	}})
	for _, conj := range []uint32{7, 9} {
		l, ok := s.lookups[conj]
		if !ok {
			t.Fatalf("no lookup of conjunction %d started", conj)
		}
		<-l.done
	}
	if len(s.lookups) != 2 || f.count() != 2 {
		t.Errorf("%d lookups, %d asked; want 2 and 2", len(s.lookups), f.count())
	}
}
