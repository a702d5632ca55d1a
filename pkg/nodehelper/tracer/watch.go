package tracer

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// watch turns the real packet's packet-ins into observations until the
// final hop reports or the deadline passes, and prints the result line.
func (s *session) watch(ctx context.Context, role report.Role, p *path, dst netip.Addr, pre []report.Observation) (Outcome, error) {
	w := &watcher{s: s, p: p, dst: dst, res: report.NodeResult{Node: s.c.Node, Role: role, Timestamp: s.start.Unix(), Observations: pre}}
	w.final, w.verdict, w.last = s.goal(p, dst)
	deadline := time.NewTimer(s.c.Timeout)
	defer deadline.Stop()
	for w.watching() {
		select {
		case pin, ok := <-s.of.PacketIns():
			if !ok {
				return Outcome{ExitCode: ExitSetup}, setupErr("OpenFlow connection closed during the trace")
			}
			if out, err := w.packetIn(ctx, pin); err != nil {
				return out, err
			}
		case pin, ok := <-s.stackPins():
			if err := w.leftStack(ctx, pin, ok); err != nil {
				return Outcome{}, err
			}
		case fr := <-s.flowRemoved():
			// Another client deleted flows of the trace: put them back.
			// Should the probe have passed meanwhile, its reports stop
			// where the flows were missing, and the deadline says so.
			if err := s.onFlowRemoved(ctx, fr); err != nil {
				return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
			}
		case <-deadline.C:
			if st := s.stack; st != nil && st.waiting {
				return s.finish(w.res, p, ExitTimeout, fmt.Sprintf("the answer went into the node's own stack and did not come out of %s's own port %s within %s: the node's kernel dropped it or sent it elsewhere", st.up.bridge.Name, st.up.local.Name, s.c.Timeout))
			}
			return s.finish(w.res, p, ExitTimeout, fmt.Sprintf(
				"the probe was not seen past hop %d within %s; OVS's trace predicted %d hops: the real packet left the predicted path (conntrack state, a group bucket) or never arrived",
				lastTrue(p.observed), s.c.Timeout, len(p.t.Hops)))
		case <-ctx.Done():
			return s.finish(w.res, p, ExitTimeout, "interrupted: "+ctx.Err().Error())
		}
	}
	return w.conclude(ctx)
}

// watcher is what watch keeps between packet-ins.
type watcher struct {
	s   *session
	p   *path
	dst netip.Addr
	res report.NodeResult
	// translated is set once a destination translation is reported: later
	// hops see the translated address, which is no new translation.
	translated bool
	// portMoved is set once a source port that conntrack moved is
	// reported (emitPortMove).
	portMoved bool
	// final, verdict and last are goal's answer, asked again whenever the
	// path is extended.
	final   int
	verdict Verdict
	last    int
	// kernelNote is what the explanation says of the node's kernel, where
	// the probe left into it (kernelTranslation).
	kernelNote string
}

// watching reports whether the watch goes on: the hop that ends it has not
// reported yet, or there is none while the path is still open.
func (w *watcher) watching() bool {
	if st := w.s.stack; st != nil && st.waiting && !st.seen {
		return true
	}
	return (w.last < 0 || !w.p.observed[w.last]) && (w.last >= 0 || w.p.open)
}

// emit reports an observation (and the hop it was made at, if any) and
// adds it to the node's result.
func (w *watcher) emit(ctx context.Context, o report.Observation, hop *report.Hop) error {
	s := w.s
	if hop != nil && hop.NoMatch && o.Action == report.ActionDropped {
		if n, err := s.pipelineFlows(ctx); err == nil {
			hop.PipelineFlows = &n
		}
	}
	if hop != nil {
		s.nameRule(ctx, &o, hop)
	}
	w.res.Observations = append(w.res.Observations, o)
	return s.c.Out.Write(report.Line{Type: report.TypeObservation, Observation: &o, Hop: hop})
}

// packetIn handles one packet-in. A non-nil error ends the watch with the
// outcome returned beside it.
func (w *watcher) packetIn(ctx context.Context, pin openflow.PacketIn) (Outcome, error) {
	s := w.s
	tag, kind, hop, cand, ok := ParseUserdata(pin.Userdata)
	if !ok || tag != s.c.Tag {
		s.foreign++
		return Outcome{}, nil
	}
	if !s.isProbe(pin.Packet) {
		// A reply that carries the tag: not the probe.
		s.ignored++
		if pin.Paused {
			_ = s.of.Send(openflow.Resume(s.of.NextXid(), pin))
		}
		return Outcome{}, nil
	}
	if kind == kindCont && w.p.open {
		return w.continued(ctx, pin, uint8(hop)) //nolint:gosec // a catcher's table, < 254
	}
	if kind != kindCopy && kind != kindMiss {
		s.foreign++
		return Outcome{}, nil
	}
	return Outcome{}, w.observed(ctx, pin, int(hop), int(cand))
}

// continued extends the path from table, where a catcher paused the probe.
func (w *watcher) continued(ctx context.Context, pin openflow.PacketIn, table uint8) (Outcome, error) {
	s := w.s
	sum, derr := probe.Decode(pin.Packet)
	if err := s.extend(ctx, w.p, pin, table); err != nil {
		return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
	}
	// A hairpinned probe is not resumed (see extend), so no copy reports
	// its translated destination: this packet-in does.
	if derr == nil && !w.translated && w.dst.IsValid() && sum.DstIP != w.dst && sum.DstIP == s.probeSrcIP {
		if err := w.emitTranslation(ctx, sum.DstIP, len(w.p.t.Hops)-1); err != nil {
			return Outcome{}, err
		}
	}
	w.final, w.verdict, w.last = s.goal(w.p, w.dst)
	return Outcome{}, nil
}

// observed reports the hop whose copy (or miss flow) sent pin: hop and cand
// are what its userdata says.
func (w *watcher) observed(ctx context.Context, pin openflow.PacketIn, hop, cand int) error {
	s, p := w.s, w.p
	i := NoteObserved(p.t, p.observed, hop)
	if i < 0 {
		return nil
	}
	p.observed[i] = true
	sum, derr := probe.Decode(pin.Packet)
	if derr == nil && !w.translated && w.dst.IsValid() && sum.DstIP != w.dst {
		if err := w.emitTranslation(ctx, sum.DstIP, i); err != nil {
			return err
		}
	}
	// A source translation without a destination one: a gateway's SNAT
	// on the way out. (A hairpin's SNAT follows its Service's DNAT, which
	// is reported already.)
	if derr == nil && !w.translated && !s.srcTranslated && s.probeSrcIP.IsValid() && sum.SrcIP.IsValid() && sum.SrcIP != s.probeSrcIP {
		if err := w.emitSourceTranslation(ctx, sum.SrcIP, i); err != nil {
			return err
		}
	}
	if derr == nil && s.want == nil && !w.portMoved && s.probeSrcPort != 0 && sum.SrcIP == s.probeSrcIP && sum.SrcPort != 0 && sum.SrcPort != s.probeSrcPort {
		if err := w.emitPortMove(ctx, sum.SrcPort, i); err != nil {
			return err
		}
	}
	if derr == nil && s.want == nil && s.probeSrcIP.IsValid() && sum.SrcIP.IsValid() && sum.SrcIP != s.probeSrcIP {
		// Translated here, reported or not (a hairpin's SNAT is not):
		// the answer goes to another address (ReplyRun.after).
		s.srcTranslated = true
	}
	h := p.t.Hops[i]
	v := w.hopVerdict(i, pin)
	o := decidingACL(Observation(h, v, s.names), p.t, i, s.names)
	if v.Action == report.ActionDelivered && derr == nil {
		o.DstMAC = sum.DstMAC.String()
	}
	if i == w.final && intoKernel(v) {
		w.kernelNote = s.kernelTranslation(&o, pin.Packet)
		w.intoStack(&o, v)
	}
	hr := HopReport(i, h, s.names, true)
	if sibs := p.siblings[hop]; cand < len(sibs) {
		// Several flows share this hop's table, priority and cookie: say
		// which one the real packet matched, not the one OVS's trace
		// printed.
		hr.Flow = openflow.FormatMatch(sibs[cand].Match)
	}
	return w.emit(ctx, o, &hr)
}

// hopVerdict is what the probe did at hop i, seen by pin: forwarded, but
// at the final hop what the trace decided, with the tunnel destination the
// real packet carries where the trace could not name it.
func (w *watcher) hopVerdict(i int, pin openflow.PacketIn) Verdict {
	v := Verdict{Action: report.ActionForwarded}
	if i == w.final {
		v = w.ownAddress(pin)
	}
	if v.Port != nil && v.Port.IsTunnel() && v.TunnelDst == "" && pin.Metadata.TunDst.IsValid() {
		// remote_ip=flow: the pipeline set tun_dst before this hop, and
		// the real packet carries it.
		v.TunnelDst = pin.Metadata.TunDst.String()
		w.verdict = v
	}
	return v
}

// ownAddress is the final hop's verdict for the packet pin shows there.
// goal judged a delivery to the node's own address (ToOwnAddress) by the
// destination the packet entered with; a pipeline that translated it on
// the way (an answer un-SNATed back to an address outside, after Antrea
// SNATed a NodePort's probe to its gateway's) sends it on to another
// address, which the real packet carries: judged by that one.
func (w *watcher) ownAddress(pin openflow.PacketIn) Verdict {
	sum, err := probe.Decode(pin.Packet)
	if err != nil || !sum.DstIP.IsValid() || !w.dst.IsValid() || sum.DstIP == w.dst {
		return w.verdict
	}
	_, raw := Final(w.p.t, w.s.br)
	v := ToOwnAddress(raw, sum.DstIP, w.s.hostAddrs)
	if v.Action != w.verdict.Action {
		w.s.c.Logf("the packet leaves for %s, not %s, which it entered with: %s, not %s", sum.DstIP, w.dst, v.Action, w.verdict.Action)
		w.verdict = v
	}
	return w.verdict
}

// conclude ends a watch whose last hop reported, or whose path closed
// with no hop to watch, and prints the result line.
func (w *watcher) conclude(ctx context.Context) (Outcome, error) {
	s, p := w.s, w.p
	if w.last < w.final {
		// The hop that decides could not be watched: report OVS's verdict,
		// marked as inferred.
		o := decidingACL(Observation(p.t.Hops[w.final], w.verdict, s.names), p.t, w.final, s.names)
		o.Inferred = true
		hr := HopReport(w.final, p.t.Hops[w.final], s.names, false)
		if err := w.emit(ctx, o, &hr); err != nil {
			return Outcome{}, err
		}
	}
	return s.finish(w.res, p, exitCode(w.verdict), summary(p.t, w.final, w.verdict, s.names)+w.kernelNote)
}

// exitCode is the exit code of a trace that ended with verdict v.
func exitCode(v Verdict) int {
	switch {
	case v.Open:
		// Neither OVS's trace nor a continuation says where the packet
		// went: the trace is not complete, whatever the hops so far say.
		return ExitTimeout
	case v.Action == report.ActionDropped || v.Action == report.ActionRejected:
		return ExitDropped
	}
	return ExitOK
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
	ex := &report.Explanation{DatapathActions: p.t.DatapathActions, Summary: sum, Naming: s.naming}
	if !s.c.Brief {
		ex.Trace = p.t.Text
		for i, h := range p.t.Hops {
			ex.Hops = append(ex.Hops, HopReport(i, h, s.names, p.observed[i]))
		}
	}
	c := code
	err := s.c.Out.Write(report.Line{Type: report.TypeResult, Result: &res, Explanation: ex, ExitCode: &c})
	return Outcome{ExitCode: code, Result: res, ForeignPacketIns: s.foreign, IgnoredPackets: s.ignored, SourceTranslated: s.srcTranslated, KeptBack: s.keptBack}, err
}

// natTable names the table to which a destination translation seen at hop
// i is attributed: the hop OVS's trace shows doing the DNAT (nat(dst=...)),
// else the last group or conntrack action before hop i.
func (s *session) natTable(t ofproto.Trace, i int) string {
	for _, h := range t.Hops {
		for _, a := range h.Actions {
			if strings.Contains(a, "nat(dst=") {
				return s.names.NameHop(h).Where
			}
		}
	}
	for _, prefix := range []string{"group:", "ct("} {
		if j := lastHopWith(t.Hops[:i], func(a string) bool { return strings.HasPrefix(a, prefix) }); j >= 0 {
			return s.names.NameHop(t.Hops[j]).Where
		}
	}
	return s.names.NameHop(t.Hops[i]).Where
}

func lastTrue(b []bool) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] {
			return i
		}
	}
	return -1
}

func summary(t ofproto.Trace, final int, v Verdict, names Namer) string {
	if final < 0 {
		return "OVS's trace has no hops"
	}
	h := t.Hops[final]
	where := names.NameHop(h).Where
	port := v.PortName
	if v.Port != nil {
		port = v.Port.Name
	}
	switch {
	case v.Held:
		return fmt.Sprintf("handed to ovn-controller by %s, which holds it until it knows the next hop's MAC; the helper does not see it after that, so the trace is not complete (%s)", where, v.Reason)
	case v.Open:
		return fmt.Sprintf("the packet went on after %s into a recirculation that neither OVS's trace nor the helper followed further (%s)", where, v.Reason)
	case v.Action == report.ActionDelivered && v.Port != nil && v.Port.PodName() == "":
		return fmt.Sprintf("delivered to the node itself through port %s by %s (%s)", port, where, v.Reason)
	case v.Action == report.ActionDelivered && v.Port != nil:
		return fmt.Sprintf("delivered to pod %s (port %s) by %s", v.Port.PodName(), port, where)
	case v.Action == report.ActionForwarded && port != "":
		return fmt.Sprintf("forwarded into tunnel %s to %s by %s", port, v.TunnelDst, where)
	case v.Action == report.ActionForwardedOutOfNetwork && port != "":
		return fmt.Sprintf("left the pod network through port %s by %s", port, where)
	case v.Action == report.ActionForwardedOutOfNetwork:
		return fmt.Sprintf("left the pod network by %s", where)
	case v.Action == report.ActionRejected:
		return fmt.Sprintf("rejected in %s by flow %q priority %d cookie %#x (%s)", where, h.Match, h.Priority, h.Cookie, v.Reason)
	case v.Action == report.ActionDropped && h.NoMatch:
		return fmt.Sprintf("dropped in %s: no flow matches (the pipeline ends here)", where)
	case v.Action == report.ActionDropped:
		return fmt.Sprintf("dropped in %s by flow %q priority %d cookie %#x", where, h.Match, h.Priority, h.Cookie)
	}
	return fmt.Sprintf("%s in %s", v.Action, where)
}
