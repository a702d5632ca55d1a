package tracer

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// flowMod splits an OpenFlow 1.5 FLOW_MOD built by openflow into what a
// test checks: table, priority, OXM match and instructions.
type flowMod struct {
	table    uint8
	priority uint16
	match    []byte
	inst     []byte
}

func splitFlowMod(t *testing.T, m []byte) flowMod {
	t.Helper()
	if len(m) < 56 {
		t.Fatalf("flow mod of %d bytes", len(m))
	}
	ml := int(binary.BigEndian.Uint16(m[50:]))
	return flowMod{table: m[24], priority: binary.BigEndian.Uint16(m[30:]), match: m[52 : 48+ml], inst: m[48+(ml+7)&^7:]}
}

func applyActions(actions ...[]byte) []byte {
	var a []byte
	for _, x := range actions {
		a = append(a, x...)
	}
	b := make([]byte, 8, 8+len(a))
	binary.BigEndian.PutUint16(b, 4)
	binary.BigEndian.PutUint16(b[2:], uint16(8+len(a))) //nolint:gosec // small
	return append(b, a...)
}

func ipSrc(a, b, c, d byte) []byte {
	// OXM_OF_IPV4_SRC
	return []byte{0x80, 0, 11 << 1, 4, a, b, c, d}
}

func conj(id uint32, k, n uint8) []byte {
	return openflow.ConjunctionAction(openflow.Conjunction{ID: id, Clause: k, NClauses: n})
}

// An Antrea-like policy table: one cookie for the whole feature, many
// flows at one priority, among them conjunction clauses of many rules.
func policyTable(rules int) []openflow.FlowDesc {
	const table, prio, ck = 12, 14000, 0x5
	ip := openflow.EthTypeField(0x800)
	var fs []openflow.FlowDesc
	for r := 1; r <= rules; r++ {
		id := uint32(r) //nolint:gosec // small
		fs = append(fs,
			openflow.FlowDesc{TableID: table, Priority: prio, Cookie: ck, Match: append(append([]byte(nil), ip...), ipSrc(10, 0, 0, byte(r))...),
				Instructions: applyActions(conj(id, 1, 2))},
			openflow.FlowDesc{TableID: table, Priority: prio, Cookie: ck, Match: append(openflow.InPortField(uint32(r)), ip...), //nolint:gosec // small
				Instructions: applyActions(conj(id, 2, 2))},
			openflow.FlowDesc{TableID: table, Priority: prio, Cookie: ck, Match: append(openflow.ConjIDField(id), ip...),
				Instructions: applyActions(openflow.ResubmitAction(13))},
		)
	}
	// A flow both in rule 1's first clause and rule 2's.
	fs = append(fs, openflow.FlowDesc{TableID: table, Priority: prio, Cookie: ck, Match: append(append([]byte(nil), ip...), ipSrc(10, 0, 1, 1)...),
		Instructions: applyActions(conj(1, 1, 2), conj(2, 1, 2))})
	// A plain flow with the same priority and cookie.
	fs = append(fs, openflow.FlowDesc{TableID: table, Priority: prio, Cookie: ck, Match: append(append([]byte(nil), ip...), openflow.InPortField(99)...),
		Instructions: applyActions(openflow.ResubmitAction(13))})
	return fs
}

func planFor(t *testing.T, hops []ofproto.Hop, flows map[uint8][]openflow.FlowDesc) Plan {
	t.Helper()
	p, err := BuildPlan(PlanInput{Trace: ofproto.Trace{Hops: hops}, Flows: flows, Tag: 5, EthType: 0x800,
		Cookie: TraceCookie(5, 1), ControllerID: 9, HardTimeout: 10, MarkHop: -1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The hop's own flow is copied, found by the match OVS's trace printed,
// however many flows share its table, priority and cookie, and no
// conjunction clause is ever copied with a controller action.
func TestBuildPlanCopiesTheHopsFlowOnly(t *testing.T) {
	table := policyTable(50)
	p := planFor(t, []ofproto.Hop{{Table: 12, Priority: 14000, Cookie: 0x5, Match: "ip,in_port=99"}}, map[uint8][]openflow.FlowDesc{12: table})
	if len(p.FlowMods) != 1 || !p.Watched[0] || len(p.Siblings) != 0 {
		t.Fatalf("%d flow mods, watched %v, siblings %d; want the one flow ip,in_port=99 (skipped: %q)", len(p.FlowMods), p.Watched[0], len(p.Siblings), p.Skipped[0])
	}
	fm := splitFlowMod(t, p.FlowMods[0])
	if fm.priority != 14001 || !strings.HasPrefix(openflow.FormatMatch(fm.match), "dl_type=0x0800,in_port=99,nw_tos=20") {
		t.Errorf("copy priority %d match %s", fm.priority, openflow.FormatMatch(fm.match))
	}
}

// Where no flow's match can be told to be the hop's, every flow with the
// hop's priority and cookie is copied, as before, but never a clause flow.
func TestBuildPlanFallbackLeavesOutConjunctionClauses(t *testing.T) {
	table := policyTable(3)
	// vlan_tci is not a field the helper compares: no exact flow.
	p := planFor(t, []ofproto.Hop{{Table: 12, Priority: 14000, Cookie: 0x5, Match: "ip,vlan_tci=0x1000/0x1000"}}, map[uint8][]openflow.FlowDesc{12: table})
	// 3 conj_id flows and the plain one.
	if len(p.FlowMods) != 4 || len(p.Siblings[0]) != 4 {
		t.Fatalf("%d flow mods, %d siblings; want the 4 flows that are not clauses", len(p.FlowMods), len(p.Siblings[0]))
	}
	for _, m := range p.FlowMods {
		if c := openflow.Conjunctions(splitFlowMod(t, m).inst); len(c) != 0 {
			t.Errorf("a copy carries conjunction actions %+v", c)
		}
	}
	// Only clauses: nothing to copy, and the hop says why.
	only := []openflow.FlowDesc{table[0], table[1]}
	p = planFor(t, []ofproto.Hop{{Table: 12, Priority: 14000, Cookie: 0x5, Match: "ip,vlan_tci=0x1000/0x1000"}}, map[uint8][]openflow.FlowDesc{12: only})
	if len(p.FlowMods) != 0 || p.Watched[0] || !strings.Contains(p.Skipped[0], "conjunction") {
		t.Errorf("%d flow mods, watched %v, skipped %q", len(p.FlowMods), p.Watched[0], p.Skipped[0])
	}
}

// A conjunctive hop (conj_id=2) is observed through a clone of the
// conjunction under the helper's own id: every clause flow of conjunction
// 2 copied at P+1 with the tag and conjunction(id', k/n) as its only
// action, and the conj_id flow copied as conj_id=id' with the controller
// action in front of its actions.
func TestBuildPlanClonesAConjunction(t *testing.T) {
	table := policyTable(50)
	hop := 3
	hops := []ofproto.Hop{{Table: 0, Priority: 1, Cookie: 1}, {Table: 1, NoMatch: true}, {Table: 2, Priority: 1, Cookie: 1},
		{Table: 12, Priority: 14000, Cookie: 0x5, Match: "conj_id=2,ip"}}
	p := planFor(t, hops, map[uint8][]openflow.FlowDesc{12: table})
	if !p.Watched[hop] {
		t.Fatalf("conjunctive hop not watched: %q", p.Skipped[hop])
	}
	clone := cloneConjID(5, hop)
	if clone != 0xf4050003 {
		t.Errorf("clone id %#x, want 0xf4050003 (base, tag 5, hop 3)", clone)
	}
	var clauses, conjFlows int
	seenClause := map[uint8]int{}
	for _, m := range p.FlowMods {
		fm := splitFlowMod(t, m)
		if fm.table != 12 {
			continue // the miss flow
		}
		if fm.priority != 14001 {
			t.Errorf("flow at priority %d, want 14001", fm.priority)
		}
		if !openflow.HasDSCP(fm.match) {
			t.Errorf("flow %s lacks the tag", openflow.FormatMatch(fm.match))
		}
		if id, ok := openflow.ConjIDOf(fm.match); ok {
			conjFlows++
			if id != clone || len(openflow.Conjunctions(fm.inst)) != 0 {
				t.Errorf("conj_id flow %s with %x", openflow.FormatMatch(fm.match), fm.inst)
			}
			continue
		}
		cs := openflow.Conjunctions(fm.inst)
		// Only the conjunction action: apply-actions header plus 16 bytes.
		if len(cs) != 1 || cs[0].ID != clone || cs[0].NClauses != 2 || len(fm.inst) != 24 {
			t.Errorf("clause copy %s carries %+v (%d instruction bytes), want only conjunction(%d,k/2)", openflow.FormatMatch(fm.match), cs, len(fm.inst), clone)
			continue
		}
		clauses++
		seenClause[cs[0].Clause]++
	}
	// Rule 2: clause 1 has nw_src=10.0.0.2 and the shared 10.0.1.1, clause 2 in_port=2.
	if clauses != 3 || seenClause[1] != 2 || seenClause[2] != 1 || conjFlows != 1 {
		t.Errorf("%d clause copies %v, %d conj_id flows; want 3 (2 of clause 1, 1 of clause 2) and 1", clauses, seenClause, conjFlows)
	}
	// Bounded by the rule, not the table: 50 rules, 4 flows for the hop.
	if n := len(p.FlowMods); n > 10*len(hops) {
		t.Errorf("%d flows for %d hops", n, len(hops))
	}
}

// Antrea compiles a Kubernetes NetworkPolicy rule into clause flows at
// priority 200 and a conj_id flow at 190 (seen on v2.3.2's EgressRule
// table): the clause copies go to 201, above the clauses, and the conj_id
// copy to 191. Clause flows of one conjunction at two priorities are no
// conjunction OVS would match: not cloned, and said why.
func TestBuildPlanClonesAConjunctionWithClausesAtAnotherPriority(t *testing.T) {
	ip := openflow.EthTypeField(0x800)
	clauses := []openflow.FlowDesc{
		{TableID: 13, Priority: 200, Cookie: 0x5, Match: append(append([]byte(nil), ip...), ipSrc(10, 0, 0, 7)...), Instructions: applyActions(conj(56, 1, 2))},
		{TableID: 13, Priority: 200, Cookie: 0x5, Match: ip, Instructions: applyActions(conj(56, 2, 2))},
	}
	conjFlow := openflow.FlowDesc{TableID: 13, Priority: 190, Cookie: 0x5, Match: append(openflow.ConjIDField(56), ip...), Instructions: applyActions(openflow.ResubmitAction(15))}
	hops := []ofproto.Hop{{Table: 13, Priority: 190, Cookie: 0x5, Match: "conj_id=56,ip"}}
	p := planFor(t, hops, map[uint8][]openflow.FlowDesc{13: append(append([]openflow.FlowDesc(nil), clauses...), conjFlow)})
	if !p.Watched[0] {
		t.Fatalf("conjunctive hop not watched: %q", p.Skipped[0])
	}
	prios := map[string]int{}
	for _, m := range p.FlowMods {
		fm := splitFlowMod(t, m)
		if _, ok := openflow.ConjIDOf(fm.match); ok {
			prios[fmt.Sprint("conj_id ", fm.priority)]++
		} else {
			prios[fmt.Sprint("clause ", fm.priority)]++
		}
	}
	if want := map[string]int{"clause 201": 2, "conj_id 191": 1}; fmt.Sprint(prios) != fmt.Sprint(want) {
		t.Errorf("flows by priority %v, want %v", prios, want)
	}

	clauses[1].Priority = 199
	p = planFor(t, hops, map[uint8][]openflow.FlowDesc{13: append(append([]openflow.FlowDesc(nil), clauses...), conjFlow)})
	if p.Watched[0] || len(p.FlowMods) != 0 || !strings.Contains(p.Skipped[0], "different priorities") {
		t.Errorf("watched %v, %d flow mods, skipped %q; want unwatched, none, a reason with \"different priorities\"", p.Watched[0], len(p.FlowMods), p.Skipped[0])
	}
}

// A conjunction the helper cannot clone whole is not cloned in part: the
// hop is explained by OVS's trace only, and says why.
func TestBuildPlanConjunctionThatCannotBeCloned(t *testing.T) {
	table := policyTable(2)
	for name, tc := range map[string]struct {
		flows []openflow.FlowDesc
		want  string
	}{
		"a clause without flows": {[]openflow.FlowDesc{table[3], table[5]}, "clause 2/2"},
		"no clause flows":        {[]openflow.FlowDesc{table[5]}, "no clause flow"},
		"the clone's id is taken": {append([]openflow.FlowDesc{{TableID: 12, Priority: 10, Cookie: 0x9,
			Match: openflow.EthTypeField(0x800), Instructions: applyActions(conj(cloneConjID(5, 0), 1, 2))}}, table...), "already has a conjunction"},
	} {
		t.Run(name, func(t *testing.T) {
			p := planFor(t, []ofproto.Hop{{Table: 12, Priority: 14000, Cookie: 0x5, Match: "conj_id=2,ip"}}, map[uint8][]openflow.FlowDesc{12: tc.flows})
			if p.Watched[0] || len(p.FlowMods) != 0 || !strings.Contains(p.Skipped[0], tc.want) {
				t.Errorf("watched %v, %d flow mods, skipped %q; want unwatched, none, a reason with %q", p.Watched[0], len(p.FlowMods), p.Skipped[0], tc.want)
			}
		})
	}
}

func TestCloneConjIDsDiffer(t *testing.T) {
	seen := map[uint32]string{}
	for tag := 1; tag <= 63; tag++ {
		for hop := 0; hop < 64; hop++ {
			id := cloneConjID(uint8(tag), hop) //nolint:gosec // small
			k := fmt.Sprintf("tag %d hop %d", tag, hop)
			if o, dup := seen[id]; dup {
				t.Fatalf("%s and %s share conjunction id %#x", o, k, id)
			}
			seen[id] = k
		}
	}
}
