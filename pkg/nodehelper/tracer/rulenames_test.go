package tracer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/antreaagent"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

type fakeRules struct {
	asked []uint32
	err   error
}

func (f *fakeRules) RuleOf(_ context.Context, conj uint32, _ string) (antreaagent.Rule, error) {
	f.asked = append(f.asked, conj)
	if f.err != nil {
		return antreaagent.Rule{}, f.err
	}
	return antreaagent.Rule{Policy: "AntreaClusterNetworkPolicy:deny", Name: "drop-8080"}, nil
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
		conj, ok := ruleConj(&report.Hop{TableName: tc.table, Flow: tc.flow})
		if conj != tc.conj || ok != tc.ok {
			t.Errorf("%s %s: %d %v; want %d %v", tc.table, tc.flow, conj, ok, tc.conj, tc.ok)
		}
	}
}

func TestNameRule(t *testing.T) {
	hop := func() *report.Hop { return &report.Hop{TableName: "IngressMetric", Flow: "priority=200,reg3=0x4"} }
	f := &fakeRules{}
	s := &session{c: Common{Rules: f, Timeout: 20 * time.Second, Logf: func(string, ...any) {}}, start: time.Now()}
	o := report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped}
	s.nameRule(context.Background(), &o, hop())
	if o.NetworkPolicy != "AntreaClusterNetworkPolicy:deny" || o.NetworkPolicyRule != "drop-8080" {
		t.Errorf("named %q %q", o.NetworkPolicy, o.NetworkPolicyRule)
	}
	f.err = errors.New("asking Antrea's agent: connection refused")
	o = report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped}
	h := hop()
	s.nameRule(context.Background(), &o, h)
	if o.NetworkPolicy != "" || h.PolicyUnknown != f.err.Error() {
		t.Errorf("policy %q, why %q", o.NetworkPolicy, h.PolicyUnknown)
	}
	// Without a namer, or on a hop already named, nothing is asked.
	n := len(f.asked)
	(&session{c: Common{Logf: func(string, ...any) {}}}).nameRule(context.Background(), &o, hop())
	o.NetworkPolicy = "K8sNetworkPolicy:ns/np"
	s.nameRule(context.Background(), &o, hop())
	if len(f.asked) != n {
		t.Errorf("asked %v", f.asked)
	}
}
