package tracer

import (
	"fmt"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// Plan is the set of flows a trace installs.
type Plan struct {
	// FlowMods are ready-to-send FLOW_MOD messages (xid 0; the session
	// does not need distinct xids for adds checked by one barrier).
	FlowMods [][]byte
	// Watched[i] is true where hop i reports when the real packet passes.
	Watched []bool
	// Skipped explains hops that cannot be watched.
	Skipped map[int]string
	// Siblings holds, for a hop whose own flow could not be told from the
	// other flows with its priority and cookie (hopFlows), all of them in
	// the order of their copies' candidate numbers: the packet-in of the
	// copy that fired says which one the real packet matched.
	Siblings map[int][]openflow.FlowDesc
}

// PlanInput is what BuildPlan needs.
type PlanInput struct {
	Trace   ofproto.Trace
	Flows   map[uint8][]openflow.FlowDesc // the flows of each table on the path
	Tag     uint8
	EthType uint16 // of the probe
	Cookie  uint64
	// ControllerID is the trace's own controller id.
	ControllerID uint16
	HardTimeout  uint16
	// From is the first hop to plan: hops before it belong to an earlier
	// part of the path whose flows are installed already.
	From int
	// Mark, when set, makes the copies of hop MarkHop set pkt_mark to it,
	// so that continuation catchers recognise the probe after that hop.
	Mark    uint32
	MarkHop int
}

// BuildPlan derives the observation flows from OVS's trace of the probe.
// A hop's flow is found among the table's flows by priority, cookie and
// match (hopFlows); a conjunctive hop is watched through a clone of its
// conjunction (cloneConjunction).
func BuildPlan(in PlanInput) (Plan, error) {
	b := newPlanner(in)
	for i := in.From; i < len(in.Trace.Hops); i++ {
		if err := b.planHop(i); err != nil {
			return b.p, err
		}
	}
	return b.p, nil
}

// flowKey is what tells one flow from another in OVS's trace: a flow
// visited twice has one copy, which reports both visits (NoteObserved).
type flowKey struct {
	table uint8
	prio  uint16
	ck    uint64
}

// planner is BuildPlan's state while it goes along the hops.
type planner struct {
	in PlanInput
	p  Plan
	// seen holds the flows planned so far, and those of the hops before
	// in.From, whose copies are installed already.
	seen map[flowKey]int
	// missSeen holds the tables whose miss flow is planned or installed.
	missSeen map[uint8]bool
}

func newPlanner(in PlanInput) *planner {
	b := &planner{
		in:       in,
		p:        Plan{Watched: make([]bool, len(in.Trace.Hops)), Skipped: map[int]string{}, Siblings: map[int][]openflow.FlowDesc{}},
		seen:     map[flowKey]int{},
		missSeen: map[uint8]bool{},
	}
	for i, h := range in.Trace.Hops[:in.From] {
		if h.NoMatch {
			b.missSeen[h.Table] = true
		} else {
			b.seen[flowKey{h.Table, h.Priority, h.Cookie}] = i
		}
	}
	return b
}

// planHop plans the observation of hop i.
func (b *planner) planHop(i int) error {
	h := b.in.Trace.Hops[i]
	if h.NoMatch {
		return b.planMiss(i, h.Table)
	}
	k := flowKey{h.Table, h.Priority, h.Cookie}
	if _, dup := b.seen[k]; dup {
		b.planRevisit(i)
		return nil
	}
	cands, exact, why := hopFlows(h, b.in.Flows[h.Table])
	if len(cands) == 0 {
		b.p.Skipped[i] = why
		return nil
	}
	b.seen[k] = i
	if !exact && len(cands) > 1 {
		b.p.Siblings[i] = cands
	}
	if id, ok := openflow.ConjIDOf(cands[0].Match); ok && exact {
		return b.planConjunction(i, cands[0], id)
	}
	for ci, fd := range cands {
		if err := b.planCopy(i, ci, fd); err != nil {
			return err
		}
	}
	return nil
}

// planMiss watches a table miss at hop i. A table miss drops; a
// lowest-priority tagged flow that only reports shows that the real packet
// really got here. One such flow per table serves every miss in it.
func (b *planner) planMiss(i int, table uint8) error {
	in := b.in
	if !b.missSeen[table] {
		ca, err := openflow.ControllerAction(in.ControllerID, userdata(in.Tag, kindMiss, uint16(i), 0), false) //nolint:gosec // hops < 64K
		if err != nil {
			return err
		}
		match := append(openflow.EthTypeField(in.EthType), tagFields(in.Tag)...)
		b.p.FlowMods = append(b.p.FlowMods, openflow.NewFlow(0, table, 0, in.Cookie|kindMiss, in.HardTimeout, match, ca))
		b.missSeen[table] = true
	}
	b.p.Watched[i] = true
	return nil
}

// planRevisit watches hop i, whose flow an earlier hop visited already:
// that hop's copy reports this visit too.
func (b *planner) planRevisit(i int) {
	if b.in.Mark != 0 && i == b.in.MarkHop {
		// The copy made for the earlier visit fires here too, and it does
		// not mark the probe: no catcher would see it.
		b.p.Skipped[i] = "its flow's copy, made for an earlier hop, cannot mark the probe for a continuation"
		return
	}
	b.p.Watched[i] = true
}

// planConjunction watches hop i, a conjunctive flow (conj_id=id), through
// a clone of its conjunction.
func (b *planner) planConjunction(i int, conj openflow.FlowDesc, id uint32) error {
	mods, why, err := cloneConjunction(b.in, i, conj, id)
	if err != nil {
		return err
	}
	if why != "" {
		b.p.Skipped[i] = why
		return nil
	}
	b.p.FlowMods = append(b.p.FlowMods, mods...)
	b.p.Watched[i] = true
	return nil
}

// planCopy copies fd, candidate ci of hop i's flows, one priority above
// it and restricted to the tagged probe. A hop is watched if any of its
// candidates can be copied, so a candidate that cannot says why only while
// none has been.
func (b *planner) planCopy(i, ci int, fd openflow.FlowDesc) error {
	in := b.in
	if fd.Priority == 0xffff {
		// A copy cannot outrank it, and a copy at the same priority would
		// overlap it with no rule for which one OVS picks: the hop is
		// explained by OVS's trace only, and says so.
		if !b.p.Watched[i] {
			b.p.Skipped[i] = "its flow has priority 65535, which no copy can outrank"
		}
		return nil
	}
	extra, why := tagMatch(fd.Match, in.EthType, in.Tag)
	if why != "" {
		// Another flow with the same priority and cookie may be the one:
		// say why only if none can be watched.
		if !b.p.Watched[i] {
			b.p.Skipped[i] = why
		}
		return nil
	}
	delete(b.p.Skipped, i)
	ca, err := in.reportActions(i, ci)
	if err != nil {
		return err
	}
	b.p.FlowMods = append(b.p.FlowMods, openflow.CopyFlow(0, fd, openflow.CopySpec{
		Cookie: in.Cookie | kindCopy, HardTimeout: in.HardTimeout, Priority: fd.Priority + 1,
		ExtraMatch: extra, Prepend: ca,
	}))
	b.p.Watched[i] = true
	return nil
}

// reportActions are what a copy of hop's flow does before the flow's own
// actions: send the probe to the trace's controller, saying which hop and
// candidate fired, and on the hop whose recirculation the trace continues
// past (MarkHop), mark the probe for the continuation's catchers.
func (in PlanInput) reportActions(hop, cand int) ([]byte, error) {
	ca, err := openflow.ControllerAction(in.ControllerID, userdata(in.Tag, kindCopy, uint16(hop), uint16(cand)), false) //nolint:gosec // hops and candidates < 64K
	if err != nil {
		return nil, err
	}
	if in.Mark != 0 && hop == in.MarkHop {
		ca = append(ca, openflow.SetFieldAction(openflow.PktMarkField(in.Mark))...)
	}
	return ca, nil
}

// tagMatch returns the OXM fields that restrict a copy of a flow with match
// to the tagged probe, or why the flow cannot be copied.
func tagMatch(match []byte, ethType uint16, tag uint8) ([]byte, string) {
	if _, err := openflow.ParseOXM(match); err != nil {
		return nil, fmt.Sprintf("cannot read the flow's match: %v", err)
	}
	if openflow.HasDSCP(match) {
		// A copy would catch every packet with that DSCP, not only the probe.
		return nil, "the flow already matches on ip_dscp"
	}
	if openflow.HasECN(match) {
		// The tag holds the ECN codepoint too (dscp.Tag).
		return nil, "the flow already matches on ip_ecn"
	}
	switch et := openflow.EthTypeOf(match); et {
	case 0:
		return append(openflow.EthTypeField(ethType), tagFields(tag)...), ""
	case 0x0800, 0x86dd:
		return tagFields(tag), ""
	default:
		return nil, fmt.Sprintf("the flow matches eth_type %#04x, not IP", et)
	}
}

// NoteObserved returns the index of the first unobserved hop that a
// packet-in from hop (as written in userdata) stands for: a flow visited
// twice has one copy, whose userdata names its first hop.
func NoteObserved(t ofproto.Trace, observed []bool, hop int) int {
	if hop < 0 || hop >= len(t.Hops) {
		return -1
	}
	h := t.Hops[hop]
	for i := hop; i < len(t.Hops); i++ {
		o := t.Hops[i]
		if !observed[i] && o.Table == h.Table && o.Priority == h.Priority && o.Cookie == h.Cookie && o.NoMatch == h.NoMatch {
			return i
		}
	}
	return -1
}

// hopFlows picks the flows to copy for hop h among its table's flows: the
// one whose match is the match OVS's trace printed for the hop, with the
// hop's priority and cookie (exact), which is the flow the probe takes.
// Only where no flow's match can be told to be the hop's (the trace's text
// or a flow holds a field the helper does not compare) does it fall back
// to every flow with the hop's priority and cookie, of which only the one
// the packet matches will fire; it then leaves out flows whose actions
// are conjunction clauses: OVS refuses a flow that mixes a conjunction
// with other actions (NXBAC_BAD_CONJUNCTION), and no packet ever "takes"
// a clause flow, so none can be the hop.
func hopFlows(h ofproto.Hop, table []openflow.FlowDesc) ([]openflow.FlowDesc, bool, string) {
	var same []openflow.FlowDesc
	for _, fd := range table {
		if fd.Priority == h.Priority && fd.Cookie == h.Cookie {
			same = append(same, fd)
		}
	}
	if len(same) == 0 {
		return nil, false, "the flow was gone when the helper read the table"
	}
	for _, fd := range same {
		if ok, err := openflow.MatchIs(fd.Match, h.Match); err == nil && ok {
			if len(openflow.Conjunctions(fd.Instructions)) > 0 {
				return nil, true, "its flow's actions are conjunction clauses, which no copy may mix with a controller action"
			}
			return []openflow.FlowDesc{fd}, true, ""
		}
	}
	var out []openflow.FlowDesc
	for _, fd := range same {
		if len(openflow.Conjunctions(fd.Instructions)) == 0 {
			out = append(out, fd)
		}
	}
	if len(out) == 0 {
		return nil, false, "the flows with its priority and cookie are conjunction clauses, which no copy may mix with a controller action"
	}
	return out, false, ""
}
