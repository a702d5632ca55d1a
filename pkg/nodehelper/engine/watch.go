package engine

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
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
// follow ("hash(...),recirc(0x2)" for a dp_hash select group).
func openEnded(t ofproto.Trace) bool {
	return len(t.Hops) > 0 && strings.Contains(t.DatapathActions, "recirc(")
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
	in := PlanInput{Trace: p.t, Flows: flows, Tag: s.c.Tag, EthType: p.ethType, Cookie: s.cookie,
		ControllerID: s.ctlID, HardTimeout: s.c.hardTimeout(), From: from, MarkHop: -1}
	if p.open {
		in.Mark, in.MarkHop = markCont, recircHop(p.t.Hops, from)
	}
	return BuildPlan(in)
}

// catchers pause the marked probe in whatever table it enters next. They
// are the highest priority, so they win over everything, and match only
// the probe (tag and pkt_mark); their remaining actions clear the mark and
// look the table up again, after the helper has replaced them with copies
// of the flows OVS says the probe takes from there.
//
// Each catcher writes its own table into its userdata: a paused
// NXT_PACKET_IN2 carries no table_id (OVS 3.1, measured), and a
// continuation traced from table 0 instead of where the packet really is
// meets the select group again and loops.
//
// Catchers go only into the tables that hold flows (OpenFlow table
// statistics), not into all 254: a pipeline uses a few dozen tables, and a
// catcher per table made every continuation cost 254 flows, more than the
// whole path's copies (issue 14 bounds a trace's flows by its path). A
// probe that reentered an empty table would meet a table miss there and
// be dropped unseen: the trace then ends at its deadline, saying where the
// probe was seen last, not with a guessed verdict.
func (s *session) catchers(ctx context.Context, ethType uint16) ([][]byte, error) {
	bodies, err := s.of.Multipart(ctx, openflow.TableStatsRequest(s.of.NextXid()))
	if err != nil {
		return nil, fmt.Errorf("read table statistics: %w", err)
	}
	var tables []uint8
	for _, b := range bodies {
		ts, err := openflow.DecodeTableStats(b)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if t.ActiveCount > 0 && t.ID < 254 {
				tables = append(tables, t.ID)
			}
		}
	}
	clear := openflow.SetFieldAction(openflow.PktMarkField(0))
	match := append(append(openflow.EthTypeField(ethType), openflow.DSCPField(s.c.Tag)...), openflow.PktMarkField(markCont)...)
	var out [][]byte
	for _, table := range tables {
		ca, err := openflow.ControllerAction(s.ctlID, userdata(s.c.Tag, kindCont, uint16(table), 0), true)
		if err != nil {
			return nil, err
		}
		actions := append(append(ca, clear...), openflow.ResubmitAction(table)...)
		out = append(out, openflow.NewFlow(0, table, 0xffff, s.cookie|kindCont, s.c.hardTimeout(), match, actions))
	}
	return out, nil
}

// extend continues the path from the table where a catcher paused the
// probe: OVS traces the real packet (with its registers and conntrack
// state) from that table, through a trampoline flow in table 0 that only
// the trace's packet (its pkt_mark) takes, the helper installs copies of
// the new hops and lets the probe go on.
//
// A probe that comes back to its own source (a Service hairpin: the load
// balancer picked the sender itself) is not resumed: OVS 3.1's
// ovs-vswitchd crashed (SIGSEGV in its main thread) resuming such a paused
// packet on OVN's hairpin path, measured in 1 of 2 to 6 traces, and was
// reproducibly spared when it was not resumed. The rest of that path is
// OVS's prediction from the real packet's state, every hop of it inferred;
// the paused probe is discarded, so it never reaches the pod.
func (s *session) extend(ctx context.Context, p *path, pin openflow.PacketIn, table uint8) error {
	p.conts++
	hairpin := false
	if sum, err := probe.Decode(pin.Packet); err == nil && s.probeSrcIP.IsValid() && sum.DstIP == s.probeSrcIP {
		hairpin = true
	}
	resume := func() {
		if !hairpin {
			_ = s.of.Send(openflow.Resume(s.of.NextXid(), pin))
		}
	}
	s.forget(kindCont)
	del, _ := openflow.DeleteByCookie(s.of.NextXid(), s.cookie|kindCont, ^uint64(0))
	// Tunnel fields the pipeline set (a tunnel destination chosen before
	// conntrack) are set again by the trampoline, not handed in as the
	// traced packet's metadata: OVS would take them for the tunnel the
	// packet arrived from, and refuse to tunnel it back there ("Not
	// tunneling to our own address"), which the real packet never met. A
	// packet that really arrived from a tunnel keeps them as metadata.
	md, tunnelSet := pin.Metadata, []byte(nil)
	if in := s.br.ByOfport(fmt.Sprint(md.InPort)); in == nil || !in.IsTunnel() {
		tunnelSet = openflow.SetTunnelActions(md)
		md.HasTunID, md.TunSrc, md.TunDst = false, netip.Addr{}, netip.Addr{}
		md.TunMetadata, md.TunFlags, md.HasTunFlags = nil, 0, false
	}
	actions := append(append(openflow.SetFieldAction(openflow.PktMarkField(0)), tunnelSet...), openflow.ResubmitAction(table)...)
	tramp := openflow.NewFlow(s.of.NextXid(), 0, 0xffff, s.cookie|kindTramp, s.c.hardTimeout(), openflow.PktMarkField(ownMark(markTramp, s.c.Tag)), actions)
	s.installed++
	for _, m := range [][]byte{del, tramp} {
		if err := s.of.Send(m); err != nil {
			resume()
			return err
		}
	}
	if err := s.of.Barrier(ctx); err != nil {
		resume()
		return fmt.Errorf("continue the trace at table %d: %w", table, err)
	}
	// The trace's packet carries no tag, so that it takes the pipeline's
	// flows and not the helper's copies of them.
	t, err := s.trace(ctx, metadataFlow(md, ownMark(markTramp, s.c.Tag)), probe.WithDSCP(pin.Packet, 0))
	undo, _ := openflow.DeleteByCookie(s.of.NextXid(), s.cookie|kindTramp, ^uint64(0))
	_ = s.of.Send(undo)
	if err != nil {
		resume()
		return fmt.Errorf("ask OVS for its trace from table %d: %w", table, err)
	}
	from := len(p.t.Hops)
	pass := 0
	if from > 0 {
		pass = p.t.Hops[from-1].Pass + 1
	}
	for _, h := range t.Hops {
		if h.Cookie == s.cookie|kindTramp {
			continue
		}
		h.Pass += pass
		p.t.Hops = append(p.t.Hops, h)
	}
	p.t.DatapathActions = t.DatapathActions
	if t.TunnelDst != "" {
		p.t.TunnelDst = t.TunnelDst
	}
	p.t.Text += fmt.Sprintf("\n=== continued at table %d with the real packet's metadata (%s) ===\n%s",
		table, metadataFlow(md, ownMark(markTramp, s.c.Tag)), t.Text)
	if hairpin {
		// Predicted, not watched: see above.
		s.c.Logf("the probe came back to its source (a hairpin): not resumed, the rest of its path is OVS's prediction")
		_ = s.of.Send(del)
		for range p.t.Hops[from:] {
			p.watched = append(p.watched, false)
			p.observed = append(p.observed, false)
		}
		p.open = false
		return nil
	}
	if _, err := s.plan(ctx, p, from, true); err != nil {
		resume()
		return err
	}
	resume()
	return nil
}

// metadataFlow writes the pipeline state of a packet-in in ofproto/trace's
// flow syntax.
func metadataFlow(md openflow.Metadata, mark uint32) string {
	var b strings.Builder
	fmt.Fprintf(&b, "in_port=%d,pkt_mark=%#x", md.InPort, mark)
	for i, r := range md.Regs {
		if md.RegsSet&(1<<i) != 0 && r != 0 {
			fmt.Fprintf(&b, ",reg%d=%#x", i, r)
		}
	}
	if md.HasMeta && md.Meta != 0 {
		fmt.Fprintf(&b, ",metadata=%#x", md.Meta)
	}
	b.WriteString(tunnelFlow(md))
	if md.CtState != 0 {
		// What conntrack told the real packet: OVS's trace of the rest
		// must see the same state, mark, label and original tuple (OVN
		// matches ct_label and the tuple for load-balancer hairpins).
		fmt.Fprintf(&b, ",ct_state=%#x,ct_zone=%d,ct_mark=%#x", md.CtState, md.CtZone, md.CtMark)
		if md.CtLabel != ([16]byte{}) {
			fmt.Fprintf(&b, ",ct_label=0x%x", md.CtLabel[:])
		}
		if md.CtNwProto != 0 && md.CtNwSrc.IsValid() && md.CtNwDst.IsValid() {
			if md.CtNwSrc.Is4() {
				fmt.Fprintf(&b, ",ct_nw_src=%s,ct_nw_dst=%s", md.CtNwSrc, md.CtNwDst)
			} else {
				fmt.Fprintf(&b, ",ct_ipv6_src=%s,ct_ipv6_dst=%s", md.CtNwSrc, md.CtNwDst)
			}
			fmt.Fprintf(&b, ",ct_nw_proto=%d,ct_tp_src=%d,ct_tp_dst=%d", md.CtNwProto, md.CtTpSrc, md.CtTpDst)
		}
	}
	return b.String()
}

// watch turns the real packet's packet-ins into observations until the
// final hop reports or the deadline passes, and prints the result line.
func (s *session) watch(ctx context.Context, role report.Role, p *path, dst netip.Addr, pre []report.Observation) (Outcome, error) {
	res := report.NodeResult{Node: s.c.Node, Role: role, Timestamp: s.start.Unix(), Observations: pre}
	emit := func(o report.Observation, hop *report.Hop) error {
		if hop != nil && hop.NoMatch && o.Action == report.ActionDropped {
			if n, err := s.pipelineFlows(ctx); err == nil {
				hop.PipelineFlows = &n
			}
		}
		if hop != nil {
			s.nameRule(ctx, &o, hop)
		}
		res.Observations = append(res.Observations, o)
		return s.c.Out.Write(report.Line{Type: report.TypeObservation, Observation: &o, Hop: hop})
	}
	translated := false
	final, verdict, last := s.goal(p, dst)
	deadline := time.NewTimer(s.c.Timeout)
	defer deadline.Stop()
	for (last < 0 || !p.observed[last]) && (last >= 0 || p.open) {
		select {
		case pin, ok := <-s.of.PacketIns():
			if !ok {
				return Outcome{ExitCode: ExitSetup}, setupErr("OpenFlow connection closed during the trace")
			}
			tag, kind, hop, cand, ok := ParseUserdata(pin.Userdata)
			if !ok || tag != s.c.Tag {
				s.foreign++
				continue
			}
			if !s.isProbe(pin.Packet) {
				// A reply that carries the tag: not the probe.
				s.ignored++
				if pin.Paused {
					_ = s.of.Send(openflow.Resume(s.of.NextXid(), pin))
				}
				continue
			}
			if kind == kindCont && p.open {
				sum, derr := probe.Decode(pin.Packet)
				if err := s.extend(ctx, p, pin, uint8(hop)); err != nil { //nolint:gosec // a catcher's table, < 254
					return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
				}
				// A hairpinned probe is not resumed (see extend), so no copy
				// reports its translated destination: this packet-in does.
				if derr == nil && !translated && dst.IsValid() && sum.DstIP != dst && sum.DstIP == s.probeSrcIP {
					translated = true
					if err := emit(report.Observation{
						Component: report.ComponentLB, ComponentInfo: s.natTable(p.t, len(p.t.Hops)-1), Action: report.ActionForwarded,
						TranslatedDstIP: sum.DstIP.String(),
					}, nil); err != nil {
						return Outcome{}, err
					}
				}
				final, verdict, last = s.goal(p, dst)
				continue
			}
			if kind != kindCopy && kind != kindMiss {
				s.foreign++
				continue
			}
			i := NoteObserved(p.t, p.observed, int(hop))
			if i < 0 {
				continue
			}
			p.observed[i] = true
			if sum, err := probe.Decode(pin.Packet); err == nil && !translated && dst.IsValid() && sum.DstIP != dst {
				translated = true
				if err := emit(report.Observation{
					Component: report.ComponentLB, ComponentInfo: s.natTable(p.t, i), Action: report.ActionForwarded,
					TranslatedDstIP: sum.DstIP.String(),
				}, nil); err != nil {
					return Outcome{}, err
				}
			}
			h := p.t.Hops[i]
			v := Verdict{Action: report.ActionForwarded}
			if i == final {
				v = verdict
			}
			if v.Port != nil && v.Port.IsTunnel() && v.TunnelDst == "" && pin.Metadata.TunDst.IsValid() {
				// remote_ip=flow: the pipeline set tun_dst before this hop,
				// and the real packet carries it.
				v.TunnelDst = pin.Metadata.TunDst.String()
				verdict = v
			}
			o := Observation(h, v, s.names)
			if v.Action == report.ActionDelivered {
				if sum, err := probe.Decode(pin.Packet); err == nil {
					o.DstMAC = sum.DstMAC.String()
				}
			}
			hr := HopReport(i, h, s.names, true)
			if sibs := p.siblings[int(hop)]; int(cand) < len(sibs) {
				// Several flows share this hop's table, priority and
				// cookie: say which one the real packet matched, not the
				// one OVS's trace printed.
				hr.Flow = openflow.FormatMatch(sibs[cand].Match)
			}
			if err := emit(o, &hr); err != nil {
				return Outcome{}, err
			}
		case fr := <-s.of.FlowRemoved():
			// Another client deleted flows of the trace: put them back.
			// Should the probe have passed meanwhile, its reports stop
			// where the flows were missing, and the deadline says so.
			if err := s.onFlowRemoved(ctx, fr); err != nil {
				return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
			}
		case <-deadline.C:
			return s.finish(res, p, ExitTimeout, fmt.Sprintf(
				"the probe was not seen past hop %d within %s; OVS's trace predicted %d hops: the real packet left the predicted path (conntrack state, a group bucket) or never arrived",
				lastTrue(p.observed), s.c.Timeout, len(p.t.Hops)))
		case <-ctx.Done():
			return s.finish(res, p, ExitTimeout, "interrupted: "+ctx.Err().Error())
		}
	}
	code := ExitOK
	switch {
	case verdict.Open:
		// Neither OVS's trace nor a continuation says where the packet
		// went: the trace is not complete, whatever the hops so far say.
		code = ExitTimeout
	case verdict.Action == report.ActionDropped || verdict.Action == report.ActionRejected:
		code = ExitDropped
	}
	if last < final {
		// The hop that decides could not be watched: report OVS's verdict,
		// marked as inferred.
		o := Observation(p.t.Hops[final], verdict, s.names)
		o.Inferred = true
		hr := HopReport(final, p.t.Hops[final], s.names, false)
		if err := emit(o, &hr); err != nil {
			return Outcome{}, err
		}
	}
	return s.finish(res, p, code, summary(p.t, final, verdict, s.names))
}

// goal says which hop decides (final), what it does, and which watched hop
// ends the watch (last; -1 if none). While the path ends open, the watch
// ends only after it has been extended. dst is the probe's destination:
// an output to the host interface that holds it is a delivery
// (ToOwnAddress).
func (s *session) goal(p *path, dst netip.Addr) (int, Verdict, int) {
	final, verdict := Final(p.t, s.br)
	verdict = ToOwnAddress(verdict, dst, s.hostAddrs)
	if p.open {
		return -1, Verdict{}, -1
	}
	last := -1
	for i := 0; i <= final && i < len(p.watched); i++ {
		if p.watched[i] {
			last = i
		}
	}
	return final, verdict, last
}

func (s *session) finish(res report.NodeResult, p *path, code int, sum string) (Outcome, error) {
	ex := &report.Explanation{DatapathActions: p.t.DatapathActions, Summary: sum, Trace: p.t.Text, Naming: s.naming}
	for i, h := range p.t.Hops {
		ex.Hops = append(ex.Hops, HopReport(i, h, s.names, p.observed[i]))
	}
	c := code
	err := s.c.Out.Write(report.Line{Type: report.TypeResult, Result: &res, Explanation: ex, ExitCode: &c})
	return Outcome{ExitCode: code, Result: res, ForeignPacketIns: s.foreign, IgnoredPackets: s.ignored}, err
}

// tunnelFlow writes the tunnel metadata a packet arrived with in
// ofproto/trace's flow syntax: the tunnel id and endpoints, and the Geneve
// options (tun_metadataN, as the bridge's TLV map numbers them) and flags.
// A pipeline may keep its own state in the options: OVN carries the
// logical ingress and egress ports in tun_metadata0, and a trace without
// them ends in a drop (OVN's table 40) where the real packet is delivered.
func tunnelFlow(md openflow.Metadata) string {
	var b strings.Builder
	if md.HasTunID {
		fmt.Fprintf(&b, ",tun_id=%#x", md.TunID)
	}
	if md.TunSrc.IsValid() {
		fmt.Fprintf(&b, ",tun_src=%s", md.TunSrc)
	}
	if md.TunDst.IsValid() {
		fmt.Fprintf(&b, ",tun_dst=%s", md.TunDst)
	}
	idx := make([]int, 0, len(md.TunMetadata))
	for i := range md.TunMetadata {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		fmt.Fprintf(&b, ",tun_metadata%d=0x%x", i, md.TunMetadata[i])
	}
	if md.HasTunFlags && md.TunFlags&1 != 0 {
		// OAM is the only flag OpenFlow sees (FLOW_TNL_PUB_F_MASK).
		b.WriteString(",tun_flags=+oam")
	}
	return b.String()
}
