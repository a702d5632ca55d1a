package outcome

import (
	"fmt"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// NodeResult is one node's part of a trace record (status.results[]): as
// observations, shown, what the output shows of the node's hops (Antrea's
// summary of them on Antrea's pipeline) and, where those are not its hops
// one for one, every hop in TableHops, with its table, flow and cookie.
// The record the plugin prints (-o json|yaml) and the one it keeps as an
// object (--keep) are both made of it, so they cannot say different things.
func NodeResult(node string, role report.Role, hops, shown []TimedHop) report.NodeResult {
	r := report.NodeResult{Node: node, Role: role}
	if len(hops) > 0 {
		r.Timestamp = hops[0].At.Unix()
	}
	same := len(shown) == len(hops)
	for i, h := range shown {
		r.Observations = append(r.Observations, h.Observation)
		same = same && h.Observation == hops[i].Observation
	}
	if same {
		return r
	}
	for _, h := range hops {
		r.TableHops = append(r.TableHops, report.TableHop{Table: h.TableID, TableName: h.TableName,
			Flow: h.Flow, Cookie: h.CookieHex(), Observation: h.Observation})
	}
	return r
}

// NodeResult is n's part of the record: NodeResult of its NodeSummary.
func (m *Model) NodeResult(n *NodeState) report.NodeResult {
	return NodeResult(n.Name, n.Role, n.Hops, m.NodeSummary(n))
}

// CookieHex is the hop's flow cookie as ovs-ofctl prints it, "" for none.
func (h Hop) CookieHex() string {
	if h.Cookie == 0 {
		return ""
	}
	return fmt.Sprintf("%#x", h.Cookie)
}
