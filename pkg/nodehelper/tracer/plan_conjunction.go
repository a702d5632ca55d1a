package tracer

import (
	"fmt"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// conjIDBase (0xf4 in the top byte) marks the conjunction ids of the
// helper's clones. A clone's id is conjIDBase | tag<<16 | hop: the tag is unique among the
// traces running on a node (the plugin hands them out), and the hop index
// is unique within a trace, so concurrent traces never share an id, and a
// trace never gives two hops one id. CNIs number their conjunctions from 1
// upwards (Antrea does); the helper still checks that the table holds no
// flow of the id before using it.
const conjIDBase = uint32(0xf4) << 24

func cloneConjID(tag uint8, hop int) uint32 {
	return conjIDBase | uint32(tag)<<16 | uint32(hop&0xffff) //nolint:gosec // masked
}

// cloneConjunction plans the observation of a hop whose flow is a
// conjunctive flow (it matches conj_id=id, at priority P). A copy of that
// flow at P+1 could never fire: OVS sets conj_id only after the clause
// flows of id, all at priority P, matched. So the helper clones the whole
// conjunction for the tagged probe under an id of its own (cloneConjID):
// each clause flow carrying conjunction(id, k/n) is copied at P+1 with the
// tag added to its match and conjunction(id', k/n) as its only action
// (OVS allows nothing else beside a conjunction), and the conj_id flow is
// copied at P+1 matching conj_id=id' and the tag, with the controller
// action in front of its original actions. OVS allows a conj_id flow to
// match other fields (ovs-fields(7): "the search for the flow with
// conj_id=id is done in the same general-purpose way as other flow table
// searches"), and if the clone's clauses do not all match, OVS goes on as
// if the cloned conjunction did not exist: the original one still decides.
// why says why the hop cannot be cloned (it is then explained by OVS's
// trace only, as inferred).
func cloneConjunction(in PlanInput, i int, conj openflow.FlowDesc, id uint32) ([][]byte, string, error) {
	if conj.Priority == 0xffff {
		return nil, "its flow is a conjunctive flow at priority 65535, which no clone can outrank", nil
	}
	table := in.Flows[in.Trace.Hops[i].Table]
	if why := unclonableClauses(table, id); why != "" {
		return nil, why, nil
	}
	clone := cloneConjID(in.Tag, i)
	mods, why := cloneClauses(in, table, id, clone)
	if why != "" {
		return nil, why, nil
	}
	flow, why, err := cloneConjIDFlow(in, i, conj, clone)
	if err != nil || why != "" {
		return nil, why, err
	}
	return append(mods, flow), "", nil
}

// unclonableClauses says why the priority of the clause flows of
// conjunction id in table keeps them from being cloned, or "".
//
// The clause flows need not share the conj_id flow's priority: Antrea puts
// a Kubernetes NetworkPolicy rule's clauses at 200 and its conj_id flow at
// 190. OVS matches a conjunction at the priority of its clauses, which
// must all be one, so each clause copy goes one above that priority, and
// the conj_id copy one above the conj_id flow's.
func unclonableClauses(table []openflow.FlowDesc, id uint32) string {
	clausePrio := -1
	for _, fd := range table {
		for _, c := range openflow.Conjunctions(fd.Instructions) {
			if c.ID != id {
				continue
			}
			if clausePrio >= 0 && int(fd.Priority) != clausePrio {
				return fmt.Sprintf("its flow is conjunctive (conj_id=%d) and the clause flows of conjunction %d have different priorities (%d, %d)", id, id, clausePrio, fd.Priority)
			}
			clausePrio = int(fd.Priority)
		}
	}
	if clausePrio == 0xffff {
		return fmt.Sprintf("the clause flows of conjunction %d are at priority 65535, which no clone can outrank", id)
	}
	return ""
}

// cloneClauses copies each clause flow of conjunction id in table for the
// tagged probe, as a clause of conjunction clone, or says why the clone
// would not be whole: its id is taken in the table, or a clause has no
// flow the probe can match.
func cloneClauses(in PlanInput, table []openflow.FlowDesc, id, clone uint32) ([][]byte, string) {
	var mods [][]byte
	clauses := map[uint8]bool{}
	var n uint8
	for _, fd := range table {
		if cid, ok := openflow.ConjIDOf(fd.Match); ok && cid == clone {
			return nil, fmt.Sprintf("its table already has a flow matching conj_id=%d, the id the helper would give its clone", clone)
		}
		for _, c := range openflow.Conjunctions(fd.Instructions) {
			if c.ID == clone {
				return nil, fmt.Sprintf("its table already has a conjunction with id %d, the id the helper would give its clone", clone)
			}
			if c.ID != id {
				continue
			}
			extra, why := tagMatch(fd.Match, in.EthType, in.Tag)
			if why != "" {
				// A clause the probe cannot match (another protocol): the
				// clause must still be covered by another flow.
				continue
			}
			n = c.NClauses
			clauses[c.Clause] = true
			mods = append(mods, openflow.CopyFlow(0, fd, openflow.CopySpec{
				Cookie: in.Cookie | kindCopy, HardTimeout: in.HardTimeout, Priority: fd.Priority + 1, ExtraMatch: extra,
				ReplaceActions: openflow.ConjunctionAction(openflow.Conjunction{ID: clone, Clause: c.Clause, NClauses: c.NClauses}),
			}))
		}
	}
	if n == 0 {
		return nil, fmt.Sprintf("its flow is conjunctive (conj_id=%d) and no clause flow of conjunction %d could be copied", id, id)
	}
	for k := uint8(1); k <= n; k++ {
		if !clauses[k] {
			return nil, fmt.Sprintf("its flow is conjunctive (conj_id=%d) and clause %d/%d has no flow the helper could copy", id, k, n)
		}
	}
	return mods, ""
}

// cloneConjIDFlow copies conj, hop i's conj_id flow, one priority above it
// for the tagged probe and matching conj_id=clone instead, with the
// copy's report in front of its actions; why says why it cannot.
func cloneConjIDFlow(in PlanInput, i int, conj openflow.FlowDesc, clone uint32) ([]byte, string, error) {
	extra, why := tagMatch(conj.Match, in.EthType, in.Tag)
	if why != "" {
		return nil, why, nil
	}
	match, err := openflow.WithConjID(conj.Match, clone)
	if err != nil {
		return nil, "cannot read the conjunctive flow's match: " + err.Error(), nil
	}
	ca, err := in.reportActions(i, 0)
	if err != nil {
		return nil, "", err
	}
	conj.Match = match
	return openflow.CopyFlow(0, conj, openflow.CopySpec{
		Cookie: in.Cookie | kindCopy, HardTimeout: in.HardTimeout, Priority: conj.Priority + 1, ExtraMatch: extra, Prepend: ca,
	}), "", nil
}
