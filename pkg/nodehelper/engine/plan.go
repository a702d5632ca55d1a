// Package engine traces a probe through a node's OVS pipeline without
// knowing the pipeline ("trace-guided observation"): it asks OVS for its
// trace of the exact probe, installs a tagged copy of every flow on that
// path (same match plus the DSCP tag, one priority higher, the trace's
// cookie and hard timeout, a controller action with the trace's own
// controller id in front of the original actions), injects the probe and
// turns the packet-ins of the real packet into observations, each
// explained by the trace's hop.
//
// Choices, and why:
//   - Copies keep the original actions, also on the last hop: the probe is
//     really delivered to the destination pod (the issue asks for the packet
//     on the pod's interface; Antrea instead reports without delivering).
//     A copy of an output into a tunnel keeps its output, so the receiver
//     sees the real packet.
//   - A table miss on the path gets a lowest-priority tagged flow that only
//     reports, so a drop there is observed, not inferred.
//   - A hop's copy is of its own flow only: the one among the table's flows
//     with the hop's priority and cookie whose match is the match OVS's
//     trace printed (compared field by field, openflow.MatchIs). A CNI may
//     give a whole feature one cookie (Antrea does), so priority and cookie
//     alone name many flows, conjunction clauses among them, which OVS
//     refuses to combine with a controller action. Only where the match
//     cannot be compared (a field the helper does not know) does every flow
//     with the hop's priority and cookie get a copy, clause flows never:
//     only the one the packet really matches fires (Plan.Siblings).
//   - A conjunctive flow (conj_id=N) cannot be watched by a copy one
//     priority up, since conj_id is set only by its clause flows (at their
//     own priority, which may be another): the helper clones the
//     conjunction under an id of its own (cloneConjunction).
//   - Where OVS's trace ends in a recirculation it cannot follow (a dp_hash
//     select group), the last copy marks the probe and catchers pause it
//     where it reenters a table; the helper traces on from there with the
//     real packet's metadata and resumes it (watch.go).
//   - The probe carries a mark in its IPv4 identification or IPv6 flow
//     label besides the tag, because replies may copy the DSCP.
//   - After installing flows that a packet looked up in the datapath's
//     cache would need, the helper waits for a revalidator round that began
//     after they were installed (revalidated), since cached datapath flows
//     translated before the copies would carry the probe past them. The
//     probe is injected once: a trace never sends a second probe that could
//     reach the destination.
//   - A CNI agent may replace the bridge's whole flow table on a resync,
//     deleting the helper's flows (the lab's agent does on every cluster
//     event, a trace's own helper pods included): every flow asks OVS for
//     a flow-removed message, and the helper installs again the flows it
//     still wants (restore.go).
package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// Cookie layout: bits 63-48 a fixed marker, 47-40 the tag, 39-8 random,
// 7-0 the kind of flow. All of a trace's flows share the bits above the
// kind, so one delete with cookieMask clears them.
const (
	cookieMarker = uint64(0x7466) << 48 // "tf"
	markerMask   = uint64(0xffff) << 48
	cookieMask   = ^uint64(0xff)
	kindCopy     = 0
	kindCatch    = 1
	kindMiss     = 2
	// kindCont pauses the probe wherever it reenters a table after the
	// hop where OVS's trace could not follow it.
	kindCont = 3
	// kindTramp starts a trace at a given table (see extend).
	kindTramp = 4
	// kindBump is a flow that matches nothing but the helper's own mark:
	// adding it makes OVS start a revalidator round (see revalidated).
	kindBump = 5
)

// pkt_mark values the helper uses on the probe only, between a hop where
// the trace ends open (a dp_hash group, say) and the next table lookup.
// markTramp and markBump are bases: a session adds its tag (ownMark), so
// that helpers of concurrent traces on one node never install flows with
// the same match and priority, which OVS would take as one flow, the later
// replacing the earlier (a trace then continued through another trace's
// trampoline: without its tunnel fields an inter-node probe's trace ended
// in "drop" at the output table, while the real probe was delivered).
const (
	markCont  = uint32(0x74660000)
	markTramp = uint32(0x74661000)
	markBump  = uint32(0x74662000)
)

// ownMark is base with the trace's tag in its low bits (tags are at most
// 63, and unique among running traces).
func ownMark(base uint32, tag uint8) uint32 { return base | uint32(tag) }

// TraceCookie builds a trace's cookie base from its tag and a random value.
func TraceCookie(tag uint8, random uint32) uint64 {
	return cookieMarker | uint64(tag)<<40 | uint64(random)<<8
}

// userdata identifies a packet-in: magic, tag, kind, hop, candidate.
const udMagic = 0x5446 // "TF"

func userdata(tag uint8, kind uint8, hop, cand uint16) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint16(b, udMagic)
	b[2], b[3] = tag, kind
	binary.BigEndian.PutUint16(b[4:], hop)
	binary.BigEndian.PutUint16(b[6:], cand)
	return b
}

// ParseUserdata reads userdata written by this package.
func ParseUserdata(b []byte) (tag, kind uint8, hop, cand uint16, ok bool) {
	if len(b) != 8 || binary.BigEndian.Uint16(b) != udMagic {
		return 0, 0, 0, 0, false
	}
	return b[2], b[3], binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:]), true
}

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
	p := Plan{Watched: make([]bool, len(in.Trace.Hops)), Skipped: map[int]string{}, Siblings: map[int][]openflow.FlowDesc{}}
	type key struct {
		table uint8
		prio  uint16
		ck    uint64
	}
	seen := map[key]int{}
	missSeen := map[uint8]bool{}
	for i, h := range in.Trace.Hops[:in.From] {
		if h.NoMatch {
			missSeen[h.Table] = true
		} else {
			seen[key{h.Table, h.Priority, h.Cookie}] = i
		}
	}
	for i := in.From; i < len(in.Trace.Hops); i++ {
		h := in.Trace.Hops[i]
		if h.NoMatch {
			// A table miss drops; a lowest-priority tagged flow that only
			// reports shows that the real packet really got here.
			if !missSeen[h.Table] {
				ca, err := openflow.ControllerAction(in.ControllerID, userdata(in.Tag, kindMiss, uint16(i), 0), false) //nolint:gosec // hops < 64K
				if err != nil {
					return p, err
				}
				match := append(openflow.EthTypeField(in.EthType), openflow.DSCPField(in.Tag)...)
				p.FlowMods = append(p.FlowMods, openflow.NewFlow(0, h.Table, 0, in.Cookie|kindMiss, in.HardTimeout, match, ca))
				missSeen[h.Table] = true
			}
			p.Watched[i] = true
			continue
		}
		k := key{h.Table, h.Priority, h.Cookie}
		if _, dup := seen[k]; dup {
			if in.Mark != 0 && i == in.MarkHop {
				// The copy made for the earlier visit fires here too, and
				// it does not mark the probe: no catcher would see it.
				p.Skipped[i] = "its flow's copy, made for an earlier hop, cannot mark the probe for a continuation"
				continue
			}
			p.Watched[i] = true
			continue
		}
		cands, exact, why := hopFlows(h, in.Flows[h.Table])
		if len(cands) == 0 {
			p.Skipped[i] = why
			continue
		}
		seen[k] = i
		if !exact && len(cands) > 1 {
			p.Siblings[i] = cands
		}
		if id, ok := openflow.ConjIDOf(cands[0].Match); ok && exact {
			mods, why, err := cloneConjunction(in, i, cands[0], id)
			if err != nil {
				return p, err
			}
			if why != "" {
				p.Skipped[i] = why
				continue
			}
			p.FlowMods = append(p.FlowMods, mods...)
			p.Watched[i] = true
			continue
		}
		for ci, fd := range cands {
			if fd.Priority == 0xffff {
				// A copy cannot outrank it, and a copy at the same priority
				// would overlap it with no rule for which one OVS picks:
				// the hop is explained by OVS's trace only, and says so.
				if !p.Watched[i] {
					p.Skipped[i] = "its flow has priority 65535, which no copy can outrank"
				}
				continue
			}
			extra, why := tagMatch(fd.Match, in.EthType, in.Tag)
			if why != "" {
				// Another flow with the same priority and cookie may be
				// the one: say why only if none can be watched.
				if !p.Watched[i] {
					p.Skipped[i] = why
				}
				continue
			}
			delete(p.Skipped, i)
			ca, err := openflow.ControllerAction(in.ControllerID, userdata(in.Tag, kindCopy, uint16(i), uint16(ci)), false) //nolint:gosec // small
			if err != nil {
				return p, err
			}
			if in.Mark != 0 && i == in.MarkHop {
				ca = append(ca, openflow.SetFieldAction(openflow.PktMarkField(in.Mark))...)
			}
			prio := fd.Priority + 1
			p.FlowMods = append(p.FlowMods, openflow.CopyFlow(0, fd, openflow.CopySpec{
				Cookie: in.Cookie | kindCopy, HardTimeout: in.HardTimeout, Priority: prio,
				ExtraMatch: extra, Prepend: ca,
			}))
			p.Watched[i] = true
		}
	}
	return p, nil
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
	switch et := openflow.EthTypeOf(match); et {
	case 0:
		return append(openflow.EthTypeField(ethType), openflow.DSCPField(tag)...), ""
	case 0x0800, 0x86dd:
		return openflow.DSCPField(tag), ""
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
	h := in.Trace.Hops[i]
	if conj.Priority == 0xffff {
		return nil, "its flow is a conjunctive flow at priority 65535, which no clone can outrank", nil
	}
	clone := cloneConjID(in.Tag, i)
	prio := conj.Priority + 1
	var mods [][]byte
	clauses := map[uint8]bool{}
	var n uint8
	// The clause flows need not share the conj_id flow's priority: Antrea
	// puts a Kubernetes NetworkPolicy rule's clauses at 200 and its conj_id
	// flow at 190. OVS matches a conjunction at the priority of its
	// clauses, which must all be one, so each clause copy goes one above
	// that priority, and the conj_id copy one above the conj_id flow's.
	clausePrio := -1
	for _, fd := range in.Flows[h.Table] {
		for _, c := range openflow.Conjunctions(fd.Instructions) {
			if c.ID != id {
				continue
			}
			if clausePrio >= 0 && int(fd.Priority) != clausePrio {
				return nil, fmt.Sprintf("its flow is conjunctive (conj_id=%d) and the clause flows of conjunction %d have different priorities (%d, %d)", id, id, clausePrio, fd.Priority), nil
			}
			clausePrio = int(fd.Priority)
		}
	}
	if clausePrio == 0xffff {
		return nil, fmt.Sprintf("the clause flows of conjunction %d are at priority 65535, which no clone can outrank", id), nil
	}
	for _, fd := range in.Flows[h.Table] {
		if cid, ok := openflow.ConjIDOf(fd.Match); ok && cid == clone {
			return nil, fmt.Sprintf("its table already has a flow matching conj_id=%d, the id the helper would give its clone", clone), nil
		}
		for _, c := range openflow.Conjunctions(fd.Instructions) {
			if c.ID == clone {
				return nil, fmt.Sprintf("its table already has a conjunction with id %d, the id the helper would give its clone", clone), nil
			}
			if c.ID != id {
				continue
			}
			extra, why := tagMatch(fd.Match, in.EthType, in.Tag)
			if why != "" {
				// A clause the probe cannot match (another protocol):
				// the clause must still be covered by another flow.
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
		return nil, fmt.Sprintf("its flow is conjunctive (conj_id=%d) and no clause flow of conjunction %d could be copied", id, id), nil
	}
	for k := uint8(1); k <= n; k++ {
		if !clauses[k] {
			return nil, fmt.Sprintf("its flow is conjunctive (conj_id=%d) and clause %d/%d has no flow the helper could copy", id, k, n), nil
		}
	}
	extra, why := tagMatch(conj.Match, in.EthType, in.Tag)
	if why != "" {
		return nil, why, nil
	}
	match, err := openflow.WithConjID(conj.Match, clone)
	if err != nil {
		return nil, "cannot read the conjunctive flow's match: " + err.Error(), nil
	}
	ca, err := openflow.ControllerAction(in.ControllerID, userdata(in.Tag, kindCopy, uint16(i), 0), false) //nolint:gosec // hops < 64K
	if err != nil {
		return nil, "", err
	}
	if in.Mark != 0 && i == in.MarkHop {
		ca = append(ca, openflow.SetFieldAction(openflow.PktMarkField(in.Mark))...)
	}
	conj.Match = match
	mods = append(mods, openflow.CopyFlow(0, conj, openflow.CopySpec{
		Cookie: in.Cookie | kindCopy, HardTimeout: in.HardTimeout, Priority: prio, ExtraMatch: extra, Prepend: ca,
	}))
	return mods, "", nil
}
