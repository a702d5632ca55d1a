package tracer

import (
	"context"
	"maps"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// maxContinuations bounds how often a trace is extended past hops where
// OVS's trace ends open or recirculates: a pipeline passes conntrack a few
// times (Antrea's three times on a Service path, OVN's a little more).
const maxContinuations = 8

// path is what the helper knows of the probe's path while it watches.
type path struct {
	t        ofproto.Trace
	watched  []bool
	observed []bool
	// open is true while the path ends in a recirculation: a select group
	// using dp_hash, which OVS's trace cannot follow, or conntrack, where
	// OVS's trace assumes a new connection (ct_state trk,new) whatever the
	// datapath's conntrack table holds for the probe's tuple. The probe is
	// then paused where it reenters a table and the path extended from
	// there, traced with the real packet's registers and conntrack state.
	open    bool
	ethType uint16
	conts   int
	// siblings are the plans' Siblings, by hop.
	siblings map[int][]openflow.FlowDesc
}

// openEnded reports whether a trace ends in a recirculation it did not
// follow ("hash(...),recirc(0x2)" for a dp_hash select group), in either
// datapath's words (ofproto.Fate.Recirc).
func openEnded(t ofproto.Trace) bool {
	return len(t.Hops) > 0 && ofproto.ParseDatapathActions(t.DatapathActions).Recirc
}

// passEnd returns the index after the last hop of the pass that hop from
// belongs to: where a recirculation (conntrack) begins the next pass.
func passEnd(hops []ofproto.Hop, from int) int {
	for i := from; i < len(hops); i++ {
		if hops[i].Pass != hops[from].Pass {
			return i
		}
	}
	return len(hops)
}

// setsTunnel reports whether a flow among hops sets tunnel metadata
// (tun_dst, tun_src, tun_id...) for an output into a tunnel later. A probe
// that carries such fields must not be paused: OVS resumes a paused packet
// as if it had arrived from that tunnel and then refuses to tunnel it back
// ("Not tunneling to our own address"), which would drop the real probe.
// Such a path is planned whole, from OVS's prediction of the passes after
// conntrack.
func setsTunnel(hops []ofproto.Hop) bool {
	for _, h := range hops {
		for _, a := range h.Actions {
			if strings.HasPrefix(a, "set_field:") && strings.Contains(a, "->tun_") {
				return true
			}
		}
	}
	return false
}

// recircHop is the hop among hops[from:] whose flow sends the packet into
// the recirculation: the one whose actions OVS annotates with "resumed at
// table" (a conntrack action with a table), else the last one with a ct
// or group action, else the last hop.
func recircHop(hops []ofproto.Hop, from int) int {
	for _, want := range []func(string) bool{
		func(a string) bool { return strings.Contains(a, "resumed at table") },
		func(a string) bool { return strings.HasPrefix(a, "ct(") || strings.HasPrefix(a, "group:") },
	} {
		for i := len(hops) - 1; i >= from; i-- {
			for _, a := range hops[i].Actions {
				if want(a) {
					return i
				}
			}
		}
	}
	return len(hops) - 1
}

// plan builds the flows for hops from on and installs them. Where the path
// recirculates, it plans only up to the recirculation: the copy of the hop
// that recirculates marks the probe, and catchers pause it where it
// reenters a table, so that the rest is traced with what the real packet
// carries (extend) rather than predicted.
func (s *session) plan(ctx context.Context, p *path, from int, revalidate bool) (Plan, error) {
	full := p.t
	if p.conts < maxContinuations && from < len(p.t.Hops) {
		if end := passEnd(p.t.Hops, from); end < len(p.t.Hops) && !setsTunnel(p.t.Hops[:end]) {
			p.t.Hops = p.t.Hops[:end:end]
			p.t.DatapathActions = ""
		}
	}
	cut := len(p.t.Hops) < len(full.Hops)
	p.open = (cut || openEnded(full)) && p.conts < maxContinuations
	plan, err := s.buildPlan(ctx, p, from)
	if err != nil {
		return plan, err
	}
	if p.open && cut && !plan.Watched[recircHop(p.t.Hops, from)] {
		// The hop that recirculates cannot mark the probe, so no catcher
		// would see it again: take OVS's prediction of the rest instead.
		s.c.Logf("hop %d cannot be watched: the path after its recirculation is OVS's prediction (ct_state trk,new)", recircHop(p.t.Hops, from))
		p.t, p.open = full, openEnded(full) && p.conts < maxContinuations
		if plan, err = s.buildPlan(ctx, p, from); err != nil {
			return plan, err
		}
	}
	for i, sibs := range plan.Siblings {
		s.c.Logf("hop %d (%s): no flow's match could be compared with OVS's %q; all %d flows with its priority and cookie are copied",
			i, s.names.NameHop(p.t.Hops[i]).Where, p.t.Hops[i].Match, len(sibs))
	}
	for i, why := range plan.Skipped {
		s.c.Logf("hop %d (%s) is explained by OVS's trace only: %s", i, s.names.NameHop(p.t.Hops[i]).Where, why)
	}
	if p.open {
		catchers, err := s.catchers(ctx, p.ethType)
		if err != nil {
			return plan, err
		}
		plan.FlowMods = append(plan.FlowMods, catchers...)
		revalidate = true
	}
	for i := from; i < len(plan.Watched); i++ {
		p.watched = append(p.watched, plan.Watched[i])
		p.observed = append(p.observed, false)
	}
	if p.siblings == nil {
		p.siblings = map[int][]openflow.FlowDesc{}
	}
	maps.Copy(p.siblings, plan.Siblings)
	s.timed("plan")
	return plan, s.install(ctx, plan, revalidate)
}

// buildPlan reads the flows of the tables on p's path from hop from on and
// builds the observation flows, the recirculating hop marking the probe
// when the path is open.
func (s *session) buildPlan(ctx context.Context, p *path, from int) (Plan, error) {
	flows, err := s.flowsOf(ctx, ofproto.Trace{Hops: p.t.Hops[from:]})
	if err != nil {
		return Plan{}, err
	}
	s.timed("flow dumps")
	in := PlanInput{Trace: p.t, Flows: flows, Tag: s.c.Tag, EthType: p.ethType, Cookie: s.cookie,
		ControllerID: s.ctlID, HardTimeout: s.c.hardTimeout(), From: from, MarkHop: -1}
	if p.open {
		in.Mark, in.MarkHop = markCont, recircHop(p.t.Hops, from)
	}
	return BuildPlan(in)
}
