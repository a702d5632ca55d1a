//go:build e2e

package e2e

// One row of the engine comparison: how the two engines' hops and verdicts agree, and the printed table.

import (
	"fmt"
	"io"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	outcomepkg "github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// compareRow is one case's outcome under both engines and real traffic.
type compareRow struct {
	name          string
	agent, helper engineRun
	real          outcome
	// callsFor is the verdict real traffic calls for (verdictFor, or
	// ForwardedOutOfNetwork for a destination outside the pod network).
	callsFor string
}

func (r compareRow) verdictsAgree() bool { return r.agent.verdict == r.helper.verdict }

// agrees says whether an engine's verdict is the one real traffic calls for.
func (r compareRow) agrees(e engineRun) bool { return e.verdict == r.callsFor }

// hopsAgree reports whether, on every node either engine reported, both
// list the same hops (hopText) in the same order.
func (r compareRow) hopsAgree() bool {
	for _, n := range r.nodeNames() {
		a, h := r.agent.results[n], r.helper.results[n]
		if len(a) != len(h) {
			return false
		}
		for i := range a {
			if !sameHop(a[i], h[i]) {
				return false
			}
		}
	}
	return true
}

// sameHop holds the helper's observation to the agent's. Where Antrea
// names no policy (a Kubernetes NetworkPolicy's default drop) and the
// helper does (its plugin-side explanation of the drop, from the policies
// in the API), the hop still agrees: the helper says more, not otherwise;
// helperAddsPolicy tells those apart. Where Antrea names a policy and the
// helper says "unknown" with its reason (a rule known on the node by its
// conjunction id only: issue 14's "or unknown with the reason"), the hop
// agrees too; helperPolicyUnknown tells those apart.
func sameHop(a, h report.Observation) bool {
	if a.NetworkPolicy == "" || unknownWithReason(a, h) {
		a.NetworkPolicy, a.NetworkPolicyRule = "", ""
		h.NetworkPolicy, h.NetworkPolicyRule = "", ""
	}
	return hopText(a) == hopText(h)
}

// unknownWithReason: Antrea names the policy, the helper says it is
// unknown and why.
func unknownWithReason(a, h report.Observation) bool {
	return a.NetworkPolicy != "" && h.NetworkPolicy == outcomepkg.UnknownPolicy && strings.HasPrefix(h.NetworkPolicyRule, "conjunction ")
}

// helperPolicyUnknown reports whether the helper says "unknown" on a hop
// where the agent names the policy.
func (r compareRow) helperPolicyUnknown() bool {
	for _, n := range r.nodeNames() {
		a, h := r.agent.results[n], r.helper.results[n]
		for i := range min(len(a), len(h)) {
			if unknownWithReason(a[i], h[i]) {
				return true
			}
		}
	}
	return false
}

// helperAddsPolicy reports whether the helper names a policy on a hop
// where the agent names none.
func (r compareRow) helperAddsPolicy() bool {
	for _, n := range r.nodeNames() {
		a, h := r.agent.results[n], r.helper.results[n]
		for i := range min(len(a), len(h)) {
			if a[i].NetworkPolicy == "" && h[i].NetworkPolicy != "" {
				return true
			}
		}
	}
	return false
}

// hopsVerdict is "yes", "yes+" (the helper adds a policy name), "yes?"
// (the helper says a policy Antrea names is unknown, and why) or "NO".
func (r compareRow) hopsVerdict() string {
	switch {
	case !r.hopsAgree():
		return "NO"
	case r.helperAddsPolicy():
		return "yes+"
	case r.helperPolicyUnknown():
		return "yes?"
	}
	return "yes"
}

// nodeNames are the nodes of both records, node 1 first.
func (r compareRow) nodeNames() []string {
	var names []string
	for _, n := range labNodes {
		if _, ok := r.agent.results[n.name]; ok {
			names = append(names, n.name)
		} else if _, ok := r.helper.results[n.name]; ok {
			names = append(names, n.name)
		}
	}
	return names
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

const compareColumn = 58

func (r compareRow) print(w io.Writer, i, n int) {
	fmt.Fprintf(w, "\n[%d/%d] %s\n", i, n, r.name)
	fmt.Fprintf(w, "  real traffic: %s (calls for %s)\n", r.real, r.callsFor)
	for _, e := range []engineRun{r.agent, r.helper} {
		fmt.Fprintf(w, "  %-6s verdict %-22s exit %d  %6.2fs  agrees with traffic: %s", e.engine, e.verdict, e.code, e.took.Seconds(), yesNo(r.agrees(e)))
		if e.errLine != "" {
			fmt.Fprintf(w, "  (%s)", e.errLine)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  verdicts agree: %s   hop lists agree: %s\n", yesNo(r.verdictsAgree()), r.hopsVerdict())
	for _, node := range r.nodeNames() {
		a, h := r.agent.results[node], r.helper.results[node]
		fmt.Fprintf(w, "  %s\n    %-*s | %s\n", node, compareColumn, "agent", "helper")
		for k := range max(len(a), len(h)) {
			var left, right string
			if k < len(a) {
				left = hopText(a[k])
			}
			if k < len(h) {
				right = hopText(h[k])
				if h[k].Inferred {
					right += " (inferred)"
				}
			}
			mark := " "
			if k >= len(a) || k >= len(h) || !sameHop(a[k], h[k]) {
				mark = "≠"
			}
			fmt.Fprintf(w, "  %s %-*s | %s\n", mark, compareColumn, left, right)
		}
	}
}

func printCompareTable(w io.Writer, rows []compareRow) {
	fmt.Fprintf(w, "\n%-30s %-14s %-14s %-10s %-8s %-6s %-7s %-7s %-7s %-7s\n", "case", "agent", "helper", "traffic", "verdict", "hops", "agent-s", "help-s", "agent=T", "help=T")
	var v, h, at, ht int
	for _, r := range rows {
		fmt.Fprintf(w, "%-30s %-14s %-14s %-10s %-8s %-6s %-7.2f %-7.2f %-7s %-7s\n", r.name, trunc(r.agent.verdict, 14), trunc(r.helper.verdict, 14), r.real,
			yesNo(r.verdictsAgree()), r.hopsVerdict(), r.agent.took.Seconds(), r.helper.took.Seconds(), yesNo(r.agrees(r.agent)), yesNo(r.agrees(r.helper)))
		v += b2n(r.verdictsAgree())
		h += b2n(r.hopsAgree())
		at += b2n(r.agrees(r.agent))
		ht += b2n(r.agrees(r.helper))
	}
	n := len(rows)
	fmt.Fprintf(w, "\nagreements: verdicts %d/%d, hop lists %d/%d, agent with real traffic %d/%d, helper with real traffic %d/%d\n", v, n, h, n, at, n, ht, n)
	fmt.Fprintln(w, "(hops yes+: the same hops, and the helper names a policy where Antrea names none: the plugin's explanation of a drop from the policies in the API)")
	fmt.Fprintln(w, "(hops yes?: the same hops, and the helper says \"unknown\" with the rule's conjunction id where Antrea names an Antrea-native policy's rule)")
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func b2n(b bool) int {
	if b {
		return 1
	}
	return 0
}
