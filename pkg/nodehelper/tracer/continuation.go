package tracer

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
)

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
	clear := openflow.SetFieldAction(openflow.PktMarkField(s.hostMark))
	match := append(append(openflow.EthTypeField(ethType), tagFields(s.c.Tag)...), openflow.PktMarkField(markCont)...)
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
	hairpin := s.hairpinned(pin)
	resume := func() {
		if !hairpin {
			_ = s.of.Send(openflow.Resume(s.of.NextXid(), pin))
		}
	}
	s.forget(kindCont)
	del, _ := openflow.DeleteByCookie(s.of.NextXid(), s.cookie|kindCont, ^uint64(0))
	md, tramp := s.trampoline(pin.Metadata, table)
	s.installed++
	if err := s.swapInTrampoline(ctx, table, del, tramp); err != nil {
		resume()
		return err
	}
	mdFlow := metadataFlow(md, ownMark(markTramp, s.c.Tag))
	t, err := s.traceFromTrampoline(ctx, mdFlow, pin.Packet)
	if err != nil {
		resume()
		return fmt.Errorf("ask OVS for its trace from table %d: %w", table, err)
	}
	from := p.appendContinuation(t, s.cookie|kindTramp, table, mdFlow)
	if s.translated != nil && !hairpin {
		// Before the probe goes on (its plan revalidates these too).
		s.translated(pin.Packet)
	}
	if hairpin {
		s.keptBack = true
		s.predictRest(p, from, del)
		return nil
	}
	if _, err := s.plan(ctx, p, from, true); err != nil {
		resume()
		return err
	}
	resume()
	return nil
}

// hairpinned reports whether the paused probe is on its way back to its
// own source (see extend).
func (s *session) hairpinned(pin openflow.PacketIn) bool {
	sum, err := probe.Decode(pin.Packet)
	return err == nil && s.probeSrcIP.IsValid() && sum.DstIP == s.probeSrcIP
}

// trampoline builds the flow in table 0 that takes the trace's packet (its
// pkt_mark) to table, and the metadata to trace that packet with.
//
// Tunnel fields the pipeline set (a tunnel destination chosen before
// conntrack) are set again by the trampoline, not handed in as the traced
// packet's metadata: OVS would take them for the tunnel the packet arrived
// from, and refuse to tunnel it back there ("Not tunneling to our own
// address"), which the real packet never met. A packet that really arrived
// from a tunnel keeps them as metadata.
func (s *session) trampoline(md openflow.Metadata, table uint8) (openflow.Metadata, []byte) {
	var tunnelSet []byte
	if in := s.br.ByOfport(fmt.Sprint(md.InPort)); in == nil || !in.IsTunnel() {
		tunnelSet = openflow.SetTunnelActions(md)
		md.HasTunID, md.TunSrc, md.TunDst = false, netip.Addr{}, netip.Addr{}
		md.TunMetadata, md.TunFlags, md.HasTunFlags = nil, 0, false
	}
	actions := append(append(openflow.SetFieldAction(openflow.PktMarkField(s.hostMark)), tunnelSet...), openflow.ResubmitAction(table)...)
	return md, openflow.NewFlow(s.of.NextXid(), 0, 0xffff, s.cookie|kindTramp, s.c.hardTimeout(), openflow.PktMarkField(ownMark(markTramp, s.c.Tag)), actions)
}

// swapInTrampoline deletes the catchers (del) and adds the trampoline, and
// waits until OVS has done both, so that the trace of the next step meets
// neither a catcher nor a missing trampoline.
func (s *session) swapInTrampoline(ctx context.Context, table uint8, del, tramp []byte) error {
	for _, m := range [][]byte{del, tramp} {
		if err := s.of.Send(m); err != nil {
			return err
		}
	}
	if err := s.of.Barrier(ctx); err != nil {
		return fmt.Errorf("continue the trace at table %d: %w", table, err)
	}
	return nil
}

// traceFromTrampoline asks OVS for its trace of frame with the metadata in
// mdFlow, which the trampoline takes on to the catcher's table, and then
// deletes the trampoline, whatever OVS answered.
func (s *session) traceFromTrampoline(ctx context.Context, mdFlow string, frame []byte) (ofproto.Trace, error) {
	// The trace's packet carries no tag, so that it takes the pipeline's
	// flows and not the helper's copies of them.
	t, err := s.trace(ctx, mdFlow, probe.WithTag(frame, 0))
	undo, _ := openflow.DeleteByCookie(s.of.NextXid(), s.cookie|kindTramp, ^uint64(0))
	_ = s.of.Send(undo)
	return t, err
}

// appendContinuation adds the hops of t, OVS's trace from the catcher's
// table, to the path as the passes after the path's last, leaving out the
// trampoline's own hop (its cookie trampCookie), and returns the index of
// the first added hop.
func (p *path) appendContinuation(t ofproto.Trace, trampCookie uint64, table uint8, mdFlow string) int {
	from := len(p.t.Hops)
	pass := 0
	if from > 0 {
		pass = p.t.Hops[from-1].Pass + 1
	}
	for _, h := range t.Hops {
		if h.Cookie == trampCookie {
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
		table, mdFlow, t.Text)
	return from
}

// predictRest ends a hairpinned probe's path with OVS's prediction from hop
// from on: its hops are not watched, and the paused probe is not resumed
// (see extend). del deletes the catchers again.
func (s *session) predictRest(p *path, from int, del []byte) {
	s.c.Logf("the probe came back to its source (a hairpin): not resumed, the rest of its path is OVS's prediction")
	_ = s.of.Send(del)
	for range p.t.Hops[from:] {
		p.watched = append(p.watched, false)
		p.observed = append(p.observed, false)
	}
	p.open = false
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
