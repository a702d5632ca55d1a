package outcome

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// th is a table hop on Antrea's pipeline as the helper reports it.
func th(table int, name, flow string, o report.Observation) TimedHop {
	return TimedHop{Hop: Hop{Node: "n1", TableID: table, TableName: name, Flow: flow, Observation: o}}
}

func fwd(c report.Component, info string) report.Observation {
	return report.Observation{Component: c, ComponentInfo: info, Action: report.ActionForwarded}
}

// The hops a helper reports on Antrea v2.3.2's pipeline, summarised as
// Antrea's agent reports them (its packetin.go): what it says, in its
// order, and nothing more.
func TestAntreaSummary(t *testing.T) {
	const (
		spoof  = "SpoofGuard"
		rt     = report.ComponentRouting
		lb     = report.ComponentLB
		np     = report.ComponentNetworkPolicy
		fw     = report.ComponentForwarding
		cls    = "Classifier"
		output = "Output"
	)
	senderService := []TimedHop{
		th(0, "PipelineRootClassifier", "priority=200,ip", fwd(fw, "PipelineRootClassifier")),
		th(3, cls, "priority=190,in_port=5", fwd(fw, cls)),
		th(4, spoof, "priority=200,ip,in_port=5,dl_src=aa:bb:cc:dd:ee:01,nw_src=10.244.1.2", fwd(report.ComponentSpoofGuard, spoof)),
		th(8, "ConntrackZone", "priority=200,ip", fwd(fw, "ConntrackZone")),
		th(12, "ServiceLB", "priority=200,tcp,nw_dst=10.96.0.10,tp_dst=80", fwd(lb, "ServiceLB")),
		{Hop: Hop{Node: "n1", Observation: report.Observation{Component: lb, ComponentInfo: "EndpointDNAT", Action: report.ActionForwarded, TranslatedDstIP: "10.244.2.3"}}},
		th(13, "EndpointDNAT", "priority=200,tcp,reg3=0xaf40203", fwd(lb, "EndpointDNAT")),
		th(17, "EgressRule", "priority=0", fwd(np, "EgressRule")),
		th(20, "L3Forwarding", "priority=200,ip,nw_dst=10.244.2.0/24", fwd(rt, "L3Forwarding")),
		th(29, output, "priority=200,reg0=0x10000/0x10000", report.Observation{Component: fw, ComponentInfo: output, Action: report.ActionForwarded, TunnelDstIP: "10.89.0.12"}),
	}
	receiverACNP := []TimedHop{
		{Hop: Hop{Node: "n2", Observation: report.Observation{Component: fw, ComponentInfo: "PipelineRootClassifier", Action: report.ActionReceived}}},
		th(3, cls, "priority=200,in_port=2", fwd(fw, cls)),
		th(25, "AntreaPolicyIngressRule", "priority=14900,conj_id=7,tcp", fwd(np, "AntreaPolicyIngressRule")),
		th(26, "IngressRule", "priority=0", fwd(np, "IngressRule")),
		th(29, output, "priority=200,reg0=0x200000/0x600000", report.Observation{Component: fw, ComponentInfo: output, Action: report.ActionDelivered, Pod: "ns/b", Inferred: true}),
	}
	egressDrop := []TimedHop{
		th(4, spoof, "priority=200,ip,in_port=5", fwd(report.ComponentSpoofGuard, spoof)),
		th(17, "EgressRule", "priority=0", fwd(np, "EgressRule")),
		th(18, "EgressDefaultRule", "priority=200,ip,reg0=0x5/0xffff", report.Observation{Component: np, ComponentInfo: "EgressDefaultRule", Action: report.ActionDropped, NetworkPolicy: "ns/deny"}),
	}
	// An Antrea-native drop rule: its conjunction flow sends the packet to
	// IngressMetric, which drops it. Not a rule it was forwarded through.
	acnpDrop := []TimedHop{
		th(4, spoof, "priority=200,ip,in_port=5", fwd(report.ComponentSpoofGuard, spoof)),
		th(22, "AntreaPolicyIngressRule", "priority=14900,conj_id=3,tcp", fwd(np, "AntreaPolicyIngressRule")),
		th(25, "IngressMetric", "priority=200,reg0=0x400000/0x400000,reg3=0x3", report.Observation{Component: np, ComponentInfo: "IngressMetric", Action: report.ActionDropped}),
	}
	// A reject rule, whose end the helper sees at Output; an egress rule
	// that let the packet out stays.
	rejectAfterEgressAllow := []TimedHop{
		th(4, spoof, "priority=200,ip,in_port=5", fwd(report.ComponentSpoofGuard, spoof)),
		th(12, "AntreaPolicyEgressRule", "priority=14900,conj_id=9,tcp", fwd(np, "AntreaPolicyEgressRule")),
		th(22, "AntreaPolicyIngressRule", "priority=14900,conj_id=4,tcp", fwd(np, "AntreaPolicyIngressRule")),
		th(25, "IngressMetric", "priority=200,reg0=0x400/0x400,reg3=0x4", fwd(np, "IngressMetric")),
		th(27, output, "priority=200,reg0=0x4400000/0xfe600000", report.Observation{Component: fw, ComponentInfo: output, Action: report.ActionRejected}),
	}
	ovn := []TimedHop{
		{Hop: Hop{Node: "n1", TableID: 8, Observation: fwd(fw, "ls_in_check_port_sec (sw1)")}},
		{Hop: Hop{Node: "n1", TableID: 44, Observation: report.Observation{Component: np, ComponentInfo: "ls_out_acl (sw1)", Action: report.ActionDropped}}},
	}
	obs := func(hs []TimedHop) []report.Observation {
		var out []report.Observation
		for _, h := range hs {
			out = append(out, h.Observation)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		hops []TimedHop
		want []report.Observation
	}{
		{"sender of a Service trace", senderService, []report.Observation{
			{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded, SrcPodIP: "10.244.1.2"},
			{Component: lb, Action: report.ActionForwarded, TranslatedDstIP: "10.244.2.3"},
			{Component: fw, ComponentInfo: output, Action: report.ActionForwarded, TunnelDstIP: "10.89.0.12"},
		}},
		{"receiver through an ACNP allow rule", receiverACNP, []report.Observation{
			{Component: fw, Action: report.ActionReceived},
			{Component: np, ComponentInfo: "IngressRule", Action: report.ActionForwarded, NetworkPolicy: UnknownPolicy, NetworkPolicyRule: nativeRuleWhy("7", "")},
			{Component: fw, ComponentInfo: output, Action: report.ActionDelivered, Pod: "ns/b", Inferred: true},
		}},
		{"egress default drop", egressDrop, []report.Observation{
			{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded},
			{Component: np, ComponentInfo: "EgressDefaultRule", Action: report.ActionDropped, NetworkPolicy: "ns/deny"},
		}},
		{"drop rule", acnpDrop, []report.Observation{
			{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded},
			{Component: np, ComponentInfo: "IngressMetric", Action: report.ActionDropped},
		}},
		{"reject rule after an egress allow", rejectAfterEgressAllow, []report.Observation{
			{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded},
			{Component: np, ComponentInfo: "EgressRule", Action: report.ActionForwarded, NetworkPolicy: UnknownPolicy, NetworkPolicyRule: nativeRuleWhy("9", "")},
			// Where Antrea reports a reject: the rule's metric table.
			{Component: np, ComponentInfo: "IngressMetric", Action: report.ActionRejected},
		}},
		{"not Antrea's pipeline: every hop as it is", ovn, obs(ovn)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AntreaSummary(tc.hops)
			if d := cmp.Diff(tc.want, obs(got)); d != "" {
				t.Errorf("summary (-want +got):\n%s", d)
			}
			// Each summarised observation is one of the hops, its table
			// and flow kept: nothing invented.
			for _, g := range got {
				found := false
				for _, h := range tc.hops {
					found = found || (h.TableID == g.TableID && h.Flow == g.Flow && h.Observation.Action == g.Observation.Action)
				}
				if !found {
					t.Errorf("summarised hop %+v is none of the hops", g.Hop)
				}
			}
			// A record carries every table hop exactly where the summary
			// changed anything.
			if carries := NodeResult("n1", report.RoleSender, tc.hops, AntreaSummary(tc.hops)).TableHops != nil; carries != (len(tc.want) != len(tc.hops) || d(tc.want, obs(tc.hops))) {
				t.Errorf("record carries table hops: %v", carries)
			}
			// A renderer printing hops as they come shows the same.
			var streamed []report.Observation
			for i := range tc.hops {
				streamed = append(streamed, AntreaNew(tc.hops[:i+1])...)
			}
			if d := cmp.Diff(tc.want, streamed); d != "" {
				t.Errorf("hop by hop (-want +got):\n%s", d)
			}
		})
	}
}

// d reports whether two observation lists differ.
func d(a, b []report.Observation) bool { return cmp.Diff(a, b) != "" }

// Antrea's agents speak in their own words already: their hops, whose
// table name is Antrea's componentInfo and which carry no flow, are never
// summarised (a rule's Forwarded would otherwise be left out).
func TestAgentHopsAreNotSummarised(t *testing.T) {
	agentHops := []report.Observation{
		{Component: report.ComponentForwarding, Action: report.ActionReceived},
		{Component: report.ComponentNetworkPolicy, ComponentInfo: "IngressRule", Action: report.ActionForwarded, NetworkPolicy: "AntreaClusterNetworkPolicy:allow", NetworkPolicyRule: "allow-80"},
		{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionDelivered},
	}
	for _, engine := range []string{EngineAgent, "helper"} {
		m := &Model{}
		m.Apply(TraceStarted{Engine: engine})
		for _, o := range agentHops {
			m.Apply(Observed{Hop: Hop{Node: "n2", Role: report.RoleReceiver, Observation: o, TableName: o.ComponentInfo}})
		}
		var got []report.Observation
		for _, h := range m.NodeSummary(m.Nodes[0]) {
			got = append(got, h.Observation)
		}
		if engine == EngineAgent {
			if d := cmp.Diff(agentHops, got); d != "" || m.NodeResult(m.Nodes[0]).TableHops != nil {
				t.Errorf("agent's hops changed (-want +got):\n%s", d)
			}
			if d := cmp.Diff(agentHops[2:], m.NewInSummary("n2")); d != "" {
				t.Errorf("NewInSummary (-want +got):\n%s", d)
			}
			continue
		}
		// The same list as a helper's (no flow: no rule seen) loses the rule:
		// which is why an agent's hops are left alone.
		if len(got) != 2 {
			t.Errorf("a helper's hops without a rule flow: %+v, want Received and Delivered", got)
		}
	}
}

// A drop or reject by an Antrea-native rule is known to OVS only by its
// conjunction id: the policy is the one the helper learnt from Antrea's
// agent for the rule's metric hop, else "unknown", with the id and why. An
// isolation drop (a default rule table) and a pipeline that is not
// Antrea's are left to other explanations.
func TestNameAntreaRule(t *testing.T) {
	np, fw := report.ComponentNetworkPolicy, report.ComponentForwarding
	metric := th(25, "IngressMetric", "priority=200,reg0=0x400/0x400,reg3=0x3", report.Observation{Component: np, ComponentInfo: "IngressMetric", Action: report.ActionForwarded})
	other := metric
	other.Node = "n2" // th puts every hop on n1
	reject := th(27, "Output", "priority=200,reg0=0x4400000/0xfe600000", report.Observation{Component: fw, ComponentInfo: "Output", Action: report.ActionRejected})
	drop := metric
	drop.Observation.Action = report.ActionDropped
	isolation := th(24, "IngressDefaultRule", "priority=200,reg1=0x5", report.Observation{Component: np, ComponentInfo: "IngressDefaultRule", Action: report.ActionDropped})
	ovnDrop := TimedHop{Hop: Hop{Node: "n2", TableID: 44, TableName: "ls_out_acl", Flow: "reg3=0x3", Observation: report.Observation{Component: np, Action: report.ActionDropped}}}
	// The helper named the rule's metric hop by asking Antrea's agent.
	named := metric
	named.Observation.NetworkPolicy, named.Observation.NetworkPolicyRule = "AntreaNetworkPolicy:ns/reject-web", "reject-8080"
	// The helper asked the agent and could not learn the name.
	asked := drop
	asked.PolicyUnknown = "no policy that Antrea's agent enforces has this conjunction id"
	for _, tc := range []struct {
		name             string
		before           []TimedHop
		end              TimedHop
		table            string
		policy, ruleName string
	}{
		{"drop in the metric table", nil, drop, "IngressMetric", UnknownPolicy, nativeRuleWhy("3", "")},
		{"drop, the agent asked in vain", nil, asked, "IngressMetric", UnknownPolicy, nativeRuleWhy("3", asked.PolicyUnknown)},
		{"reject at Output after the rule's metric table", []TimedHop{metric}, reject, "IngressMetric", UnknownPolicy, nativeRuleWhy("3", "")},
		{"reject at Output after the helper named the rule", []TimedHop{named}, reject, "IngressMetric", "AntreaNetworkPolicy:ns/reject-web", "reject-8080"},
		{"reject at Output, the metric hop on another node", []TimedHop{other}, reject, "", "", ""},
		{"isolation drop", nil, isolation, "", "", ""},
		{"not Antrea's pipeline", nil, ovnDrop, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule, _, ok := AntreaRuleEnd(tc.before, tc.end.Hop)
			o, named := NameAntreaRule(tc.before, tc.end.Hop)
			if rule.TableName != tc.table || ok != (tc.table != "") || named != ok {
				t.Fatalf("table %q ok %v named %v; want %q", rule.TableName, ok, named, tc.table)
			}
			if ok && (o.NetworkPolicy != tc.policy || o.NetworkPolicyRule != tc.ruleName) {
				t.Errorf("policy %q rule %q; want %q %q", o.NetworkPolicy, o.NetworkPolicyRule, tc.policy, tc.ruleName)
			}
		})
	}
}
