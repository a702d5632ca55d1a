package outcome

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Antrea's agent reports two or three observations per node, not one per
// OpenFlow table: it installs its Traceflow flows only where a decision is
// made (the output table, the policy drop tables) and reads the rest from
// the one packet-in's registers (v2.3.2, pkg/agent/controller/traceflow).
// What it says, in order:
//
//   - on the sender, SpoofGuard Forwarded (with srcPodIP); on a receiver, Forwarding
//     Received (no componentInfo);
//   - LB Forwarded with translatedDstIP when the packet was DNATed (no
//     componentInfo);
//   - NetworkPolicy EgressRule / IngressRule Forwarded, with the policy and
//     rule, when a rule let the packet through (its conjunction id is in a
//     register);
//   - NetworkPolicy Dropped (or Rejected) at EgressMetric / IngressMetric
//     (a policy rule) or EgressDefaultRule / IngressDefaultRule (isolation);
//   - Forwarding Output: Delivered, Forwarded with tunnelDstIP, or
//     ForwardedOutOfOverlay (ForwardedOutOfNetwork).
//
// It never reports Routing. The helper sees every table the probe passes;
// AntreaView keeps of a node's hops the ones that say the same things, and
// only on a pipeline that Antrea's table names identify (the real Antrea, or
// the lab's imitation of it). Every kept observation is one of the hops as
// the helper reported it (or that hop with Antrea's componentInfo), so
// nothing is invented and an inferred hop stays inferred. The hops
// themselves stay in the model: -o wide and the record's tableHops show
// every one.

// antreaTables are Antrea v2's OpenFlow table names (its pipeline.go).
var antreaTables = func() map[string]bool {
	set := map[string]bool{}
	for _, n := range strings.Fields(`PipelineRootClassifier ARPSpoofGuard ARPResponder Classifier SpoofGuard IPv6
		PipelineIPClassifier UnSNAT ConntrackZone ConntrackState PreRoutingClassifier NodePortMark SessionAffinity
		ServiceLB DSRServiceMark EndpointDNAT DNAT EgressSecurityClassifier AntreaPolicyEgressRule EgressRule
		EgressDefaultRule EgressMetric L3Forwarding EgressMark EgressQoS L3DecTTL SNATMark SNAT L2ForwardingCalc
		TrafficControl IngressSecurityClassifier AntreaPolicyIngressRule IngressRule IngressDefaultRule IngressMetric
		ConntrackCommit VLAN Output MulticastEgressRule MulticastEgressMetric MulticastEgressPodMetric
		MulticastRouting MulticastIngressRule MulticastIngressMetric MulticastIngressPodMetric MulticastOutput NonIP`) {
		set[n] = true
	}
	return set
}()

// AntreaTable reports whether name is one of Antrea's table names.
func AntreaTable(name string) bool { return antreaTables[name] }

// onAntreaPipeline reports whether h was named from Antrea's pipeline: by
// its table, or, for the observations a helper makes without a table hop
// (Received, the LB's translation), by the table its componentInfo names.
func onAntreaPipeline(h Hop) bool {
	return antreaTables[h.TableName] || (h.TableName == "" && antreaTables[h.Observation.ComponentInfo])
}

// conjMatch is how a rule table's flow for a policy rule matches: on the
// conjunction id its clause flows set.
var conjMatch = regexp.MustCompile(`(?:^|,)conj_id=(\d+)`)

// metricConjMatch is the conjunction id in a metric table's flow for a
// deny or reject rule (reg3=N, where the rule flow loaded it: Antrea's
// APConjIDField).
var metricConjMatch = regexp.MustCompile(`(?:^|,)reg3=(0x[0-9a-fA-F]+|\d+)`)

// UnknownPolicy is the policy name of a hop that went through, or ended
// at, a rule of a policy the helper cannot name.
const UnknownPolicy = "unknown"

// nativeRuleWhy says why a rule known by its conjunction id (as a flow
// prints it: decimal in conj_id, hexadecimal in a register) has no name:
// the helper's own reason where it asked Antrea's agent and could not
// learn it (asked), else that no agent was asked.
func nativeRuleWhy(conj, asked string) string {
	if n, err := strconv.ParseUint(conj, 0, 32); err == nil {
		conj = strconv.FormatUint(n, 10)
	}
	why := "conjunction " + conj + ": the node's flows know the rule by that id only, and only Antrea's agent maps it to its policy"
	if asked != "" {
		return why + ", and the helper could not learn it from the agent: " + asked + " (antctl get ovsflows on the node, or --engine agent)"
	}
	return why + ", which the helper did not ask on this node (no AntreaAgentInfo names its agent, or --antrea-names=false) (antctl get ovsflows on the node, or --engine agent)"
}

// AntreaRuleEnd reports, for a hop that dropped or rejected the probe on
// Antrea's pipeline, the metric table hop of the policy rule that decided
// it and the rule's conjunction id: the hop itself when a metric table's
// flow for a rule dropped it, or, for a reject (which Antrea carries out
// through a controller action in its Output table), the last metric table
// hop of the same node before it. hops are the path's hops before end.
func AntreaRuleEnd(hops []TimedHop, end Hop) (rule Hop, conj string, ok bool) {
	a := end.Observation.Action.Normalize()
	if !antreaTables[end.TableName] || (a != report.ActionDropped && a != report.ActionRejected) {
		return Hop{}, "", false
	}
	metric := func(h Hop) (string, bool) {
		if h.TableName != "IngressMetric" && h.TableName != "EgressMetric" {
			return "", false
		}
		m := metricConjMatch.FindStringSubmatch(h.Flow)
		if m == nil {
			return "", false
		}
		return m[1], true
	}
	if c, ok := metric(end); ok {
		return end, c, true
	}
	if end.TableName != "Output" || a != report.ActionRejected {
		return Hop{}, "", false
	}
	for i := len(hops) - 1; i >= 0; i-- {
		if hops[i].Node != end.Node {
			continue
		}
		if c, ok := metric(hops[i].Hop); ok {
			return hops[i].Hop, c, true
		}
	}
	return Hop{}, "", false
}

// NameAntreaRule names the policy of a hop that ended at an Antrea policy
// rule (AntreaRuleEnd), where nothing names it yet: as the helper named
// the rule's metric hop (a reject ends at the Output table, after it), or
// "unknown" with the reason.
func NameAntreaRule(hops []TimedHop, end Hop) (report.Observation, bool) {
	o := end.Observation
	rule, conj, ok := AntreaRuleEnd(hops, end)
	if !ok || o.NetworkPolicy != "" {
		return o, false
	}
	if r := rule.Observation; r.NetworkPolicy != "" && r.NetworkPolicy != UnknownPolicy {
		o.NetworkPolicy, o.NetworkPolicyRule = r.NetworkPolicy, r.NetworkPolicyRule
		return o, true
	}
	why := rule.PolicyUnknown
	if why == "" {
		why = end.PolicyUnknown
	}
	o.NetworkPolicy, o.NetworkPolicyRule = UnknownPolicy, nativeRuleWhy(conj, why)
	return o, true
}

// srcMatch is the source address a spoof guard flow matches on.
var srcMatch = regexp.MustCompile(`(^|,)(?:nw_src|ipv6_src)=([0-9a-fA-F.:]+)(,|$| )`)

// AntreaView returns the observation Antrea's agent would make of hop h,
// and false where Antrea reports nothing of it: the hops of a plain
// forwarding table. Hops not on Antrea's pipeline are kept as they are.
// seen holds the components already reported on this node, so that the
// first SpoofGuard and the first rule of each direction report once;
// AntreaView adds to it.
func AntreaView(h Hop, seen map[string]bool) (report.Observation, bool) {
	o := h.Observation
	if !onAntreaPipeline(h) {
		return o, true
	}
	once := func(key string) bool {
		if seen[key] {
			return false
		}
		seen[key] = true
		return true
	}
	switch a := o.Action.Normalize(); {
	case a == report.ActionReceived:
		o.ComponentInfo = ""
		return o, once("received")
	case a != report.ActionForwarded:
		// Delivered, Dropped, Rejected, out of the network: the deciding
		// hop, named by its table as Antrea names it.
		return o, true
	case o.TunnelDstIP != "" || h.TableName == "Output":
		// Antrea reports its output table whatever it does.
		o.Component = report.ComponentForwarding
		return o, true
	case o.TranslatedDstIP != "" || o.TranslatedSrcIP != "":
		o.Component, o.ComponentInfo = report.ComponentLB, ""
		return o, once("lb")
	case h.TableName == "SpoofGuard":
		o.Component, o.ComponentInfo = report.ComponentSpoofGuard, ""
		if m := srcMatch.FindStringSubmatch(h.Flow); m != nil && o.SrcPodIP == "" {
			// The address the spoof guard let through: the flow matched it.
			o.SrcPodIP = m[2]
		}
		return o, once("spoofguard")
	case o.Component == report.ComponentNetworkPolicy && conjMatch.MatchString(h.Flow):
		// A rule flow let the packet through: Antrea names the table of
		// Kubernetes and Antrea-native rules alike by the direction, and
		// the rule's policy, which the helper cannot.
		info := "IngressRule"
		if strings.Contains(h.TableName, "Egress") {
			info = "EgressRule"
		}
		o.ComponentInfo = info
		if o.NetworkPolicy == "" {
			o.NetworkPolicy, o.NetworkPolicyRule = UnknownPolicy, nativeRuleWhy(conjMatch.FindStringSubmatch(h.Flow)[1], h.PolicyUnknown)
		}
		return o, once(info)
	}
	return o, false
}

// AntreaSummary is AntreaView over one node's hops in order. A rule that
// the packet matched and that then dropped or rejected it is no rule it
// was forwarded through: Antrea reports a drop rule at the drop, not as a
// NetworkPolicy Forwarded (its agent reads the allow rules' conjunction
// register for that, which a drop rule does not set). So a drop or reject
// takes back the last rule hop before it, of its own direction (or of
// either, where the table that ended the path has none, as a reject's
// Output).
func AntreaSummary(hops []TimedHop) []TimedHop {
	seen := map[string]bool{}
	var out []TimedHop
	for i, h := range hops {
		o, ok := AntreaView(h.Hop, seen)
		if !ok {
			continue
		}
		if rule, _, ok := AntreaRuleEnd(hops[:i], h.Hop); ok && h.TableName == "Output" {
			// Antrea reports a reject at the rule's metric table, where
			// its agent reads the rule from; the helper saw it carried
			// out by the Output table's controller action.
			o.Component, o.ComponentInfo = report.ComponentNetworkPolicy, rule.TableName
		}
		if a := o.Action.Normalize(); onAntreaPipeline(h.Hop) && (a == report.ActionDropped || a == report.ActionRejected) {
			for i := len(out) - 1; i >= 0; i-- {
				if dir := ruleDirection(out[i].Observation); dir != "" {
					if d := direction(h.TableName); d == "" || d == dir {
						out = append(out[:i], out[i+1:]...)
					}
					break
				}
			}
		}
		h.Observation = o
		out = append(out, h)
	}
	return out
}

// ruleDirection is "Ingress" or "Egress" for a summarised rule hop (a
// NetworkPolicy Forwarded through a rule), else "".
func ruleDirection(o report.Observation) string {
	if o.Component != report.ComponentNetworkPolicy || o.Action.Normalize() != report.ActionForwarded {
		return ""
	}
	return direction(o.ComponentInfo)
}

// direction is the policy direction an Antrea table name says.
func direction(table string) string {
	switch {
	case strings.Contains(table, "Ingress"):
		return "Ingress"
	case strings.Contains(table, "Egress"):
		return "Egress"
	}
	return ""
}

// ends reports whether h ends its node's part of the path: a verdict, or
// the output table (into a tunnel, say).
func ends(h Hop) bool {
	return h.Observation.Action.Normalize() != report.ActionForwarded && h.Observation.Action.Normalize() != report.ActionReceived ||
		h.Observation.TunnelDstIP != "" || h.TableName == "Output"
}

// AntreaSettled is AntreaSummary of hops as far as it cannot change any
// more: until the node's path has ended, a rule hop may yet be taken back
// by a drop, so it waits. A record written while the trace runs shows it.
func AntreaSettled(hops []TimedHop) []TimedHop {
	sum := AntreaSummary(hops)
	if len(hops) > 0 && ends(hops[len(hops)-1].Hop) {
		return sum
	}
	var out []TimedHop
	for _, h := range sum {
		if ruleDirection(h.Observation) == "" {
			out = append(out, h)
		}
	}
	return out
}

// AntreaNew is what the last of a node's hops adds to its summary, for a
// renderer that prints hops as they come: nothing, or one or more
// observations (a rule hop waits for the end of the node's path, then
// comes before it). Printed in turn, they make AntreaSummary.
func AntreaNew(hops []TimedHop) []report.Observation {
	if len(hops) == 0 {
		return nil
	}
	before, now := AntreaSettled(hops[:len(hops)-1]), AntreaSettled(hops)
	var out []report.Observation
	for _, h := range now[min(len(before), len(now)):] {
		out = append(out, h.Observation)
	}
	return out
}

// EngineAgent is TraceStarted.Engine for a trace by Antrea's own agents.
const EngineAgent = "agent"

// summarises reports whether m's hops are a helper's, each table a hop:
// Antrea's agents report in their own words already (and their hops carry
// Antrea's componentInfo as table name, without a flow).
func (m *Model) summarises() bool { return m.Trace.Engine != EngineAgent }

// NodeSummary is what n's hops say in Antrea's words (AntreaSummary), for
// a helper's trace; an agent's hops as they are.
func (m *Model) NodeSummary(n *NodeState) []TimedHop {
	// An answer's hops are every hop: Antrea's words are for a probe's
	// way (its agents report no answer), and plain output prints them all.
	if !m.summarises() || n.Role == report.RoleReply {
		return n.Hops
	}
	return AntreaSummary(n.Hops)
}

// SummaryCounts is Counts over each node's NodeSummary, the hops the
// default output shows: for a helper's trace on Antrea's pipeline, its few
// observations a node, not every table the probe passed.
func (m *Model) SummaryCounts() (hops, inferred int) {
	for _, n := range m.Nodes {
		for _, h := range m.NodeSummary(n) {
			hops++
			if h.Inferred() {
				inferred++
			}
		}
	}
	return hops, inferred
}

// NewInSummary is what the last hop node reported adds to NodeSummary
// (AntreaNew), for a renderer that prints hops as they come; for an
// agent's trace, that hop as it is.
func (m *Model) NewInSummary(node string) []report.Observation {
	for _, n := range m.Nodes {
		if n.Name != node || len(n.Hops) == 0 {
			continue
		}
		if !m.summarises() {
			return []report.Observation{n.Hops[len(n.Hops)-1].Observation}
		}
		return AntreaNew(n.Hops)
	}
	return nil
}
