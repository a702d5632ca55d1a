package tracer

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// The answer's trace (a round trip, --reply-tag).
//
// The destination's kernel answers the probe it was delivered (a SYN-ACK,
// a RST, an echo reply, an ICMP error) with a packet of its own making,
// which carries neither the probe's tag (Linux does not reflect a SYN's
// DSCP into its SYN-ACK) nor its mark. So the answer is caught by what it
// must be: a packet to the probe's source address and source port (TCP,
// UDP), or an echo reply or ICMP error to that address, checked in the
// packet-in against the probe (probe.ReplyTo.Answers: the SYN's
// acknowledgement, the echo's identifier, the probe's header quoted by an
// ICMP error). Catch flows in table 0, above everything, pause it wherever
// it enters this node's pipeline (from the answering pod's port, or from
// a tunnel on its way back), tag it with the reply tag, and send it on
// through table 0 once the helper has installed the copies of its path,
// as a receiver does with the probe (Receive). The answer so goes on to
// the source with the reply tag in its DSCP, nothing else changed; the
// source pod's kernel, which never opened the connection, answers a
// SYN-ACK with a RST, as it would any stray SYN-ACK.
//
// A packet the catch flows pause that is not the answer (another
// connection's packet to the same port, another ping's echo reply) goes
// on with the reply tag in its DSCP, and is not followed.

// ReplyRun is an answer's trace beside the probe's: opened with the
// probe's trace, armed once the probe is known.
type ReplyRun struct {
	s      *session
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// sender: armed on the probe's sender, before the probe goes, where
	// it may wait for the catch keys it needs (waitFor).
	sender bool
	// anyAddress: the answer is caught whatever address it comes back
	// to (probe.ReplyTo.AnyAddress), or also at the address the pipeline
	// translated the probe's source to (ArmTranslated), so a translated
	// source does not stop it being followed.
	anyAddress atomic.Bool
	// mu guards tos, the answers the catch takes: the probe's own, and
	// the translated probe's (ArmTranslated).
	mu  sync.Mutex
	tos []probe.ReplyTo
}

// answers says whether frame answers one of the probes the catch is armed
// for, and how.
func (r *ReplyRun) answers(frame []byte) (report.Answer, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, to := range r.tos {
		if a, ok := to.Answers(frame); ok {
			return a, true
		}
	}
	return report.Answer{}, false
}

// waitFor is the classes of answer (catchKey.class) the sender waits to
// catch before its probe goes: the answers a probe of to's protocol gets
// from a destination that does not take it (an echo reply, and the ICMP
// errors a ping or a UDP probe to a closed port gets). A TCP probe's
// answers come to its own port, taken with the port (holdSourcePort);
// where another trace catches ICMP errors to its source, it goes on
// without. A receiver waits for nothing: the probe is paused there.
func (r *ReplyRun) waitFor(to probe.ReplyTo) []string {
	switch {
	case !r.sender:
		return nil
	case to.Protocol == probe.ICMP:
		return []string{"echo reply", "ICMP error"}
	case to.Protocol == probe.UDP:
		return []string{"ICMP error"}
	}
	return nil
}

// openReply opens the answer's trace beside the probe's session, with its
// reply tag.
func openReply(ctx context.Context, probeSession *session) (*ReplyRun, error) {
	c := probeSession.c
	c.Tag, c.ReplyTag, c.Mark, c.Out = c.ReplyTag, 0, 0, c.Out.ForReply()
	ctx, cancel := context.WithCancel(ctx)
	s, err := probeSession.beside(ctx, c)
	if err != nil {
		cancel()
		return nil, err
	}
	return &ReplyRun{s: s, ctx: ctx, cancel: cancel}, nil
}

// Arm installs the catch flows for the answer to the probe to describes
// and follows the answer in the background. It returns once the catch
// flows are in the tables. The datapath's flow cache must be revalidated
// against them before the probe goes on (an answer looked up in a
// megaflow translated before would pass them): the caller does so with
// the probe's own flows, in one revalidation instead of two.
func (r *ReplyRun) Arm(to probe.ReplyTo) error {
	s, ctx := r.s, r.ctx
	r.anyAddress.Store(to.AnyAddress)
	r.tos = []probe.ReplyTo{to}
	s.extraCatch = make(chan catchRequest)
	s.want = func(frame []byte) bool {
		_, ok := r.answers(frame)
		return ok
	}
	catch, keys, err := s.answerCatch(to)
	if err == nil {
		catch = s.takeCatches(ctx, catch, keys, r.waitFor(to)...)
		err = s.install(ctx, catch, false)
	}
	if err == nil {
		err = s.ready(report.RoleReceiver, len(catch.FlowMods), "", "")
	}
	if err != nil {
		return setupErr("arm the answer's catch: %w", err)
	}
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		if _, err := s.followAnswer(ctx, catch, r.answers); err != nil {
			s.c.Logf("the answer's trace: %v", err)
		}
	}()
	return nil
}

// ArmTranslated also catches the answer to the probe as frame shows it
// after the pipeline translated its source (a gateway router's SNAT, seen
// where a continuation paused it): the answer from the probe's
// destination (from) comes back to that address and port (or ICMP
// identifier, which the datapath's NAT may change too). It returns once
// the catch flows are in the tables; the caller revalidates before the
// probe goes on. Nothing is armed where the source is the probe's own, or
// the answer's trace has ended.
func (r *ReplyRun) ArmTranslated(frame []byte, own, from netip.Addr) {
	if r == nil || r.done == nil {
		return
	}
	to, ok := probe.ReplyToFrame(frame)
	if !ok || to.Source == own || !from.IsValid() {
		return
	}
	to.From = from
	if r.arm(to, "the probe's source was translated to "+to.Source.String()) {
		r.anyAddress.Store(true)
	}
}

// ArmMovedPort also catches the answer to the probe as frame shows it
// where conntrack moved its source port and kept its address: a DNAT
// whose answer's tuple a tracked connection holds already (an earlier
// probe from the same port, still in TIME_WAIT) gets another source port,
// and the answer comes back to that port, from the address the probe was
// sent on to (frame's destination), until conntrack undoes it. Nothing is
// armed for the probe's own port or another source address (ArmTranslated
// is for that).
func (r *ReplyRun) ArmMovedPort(frame []byte, own netip.Addr) {
	if r == nil || r.done == nil {
		return
	}
	to, ok := probe.ReplyToFrame(frame)
	sum, err := probe.Decode(frame)
	if !ok || err != nil || to.Source != own || to.Protocol == probe.ICMP {
		return
	}
	to.From = sum.DstIP
	r.arm(to, fmt.Sprintf("conntrack moved the probe's source port to %d (a connection it tracks held the answer's tuple)", to.SrcPort))
}

// arm adds to to what the catch takes, once, and has the waiting answer's
// trace catch it; why says what moved the answer, for the log. It reports
// whether catch flows for to went into the tables.
func (r *ReplyRun) arm(to probe.ReplyTo, why string) bool {
	r.mu.Lock()
	for _, t := range r.tos {
		if t.Source == to.Source && t.SrcPort == to.SrcPort && t.ICMPID == to.ICMPID {
			r.mu.Unlock()
			return false
		}
	}
	r.tos = append(r.tos, to)
	r.mu.Unlock()
	catch, keys, err := r.s.answerCatch(to)
	if err != nil {
		r.s.c.Logf("%s: its answer's catch: %v", why, err)
		return false
	}
	// The probe is paused here: take what is free, wait for nothing.
	if catch = r.s.takeCatches(r.ctx, catch, keys); len(catch.FlowMods) == 0 {
		return false // all held by other traces: its result says what it could not catch
	}
	req := catchRequest{plan: catch, done: make(chan error, 1)}
	select {
	case r.s.extraCatch <- req:
	case <-r.done:
		return false
	}
	select {
	case err = <-req.done:
	case <-r.done:
		return false
	}
	if err != nil {
		r.s.c.Logf("%s: its answer's catch: %v", why, err)
		return false
	}
	r.s.c.Logf("%s: its answer is caught there too", why)
	return true
}

// catchRequest asks an answer's trace that waits for its answer to catch it
// with more flows (plan); done says whether they are in the tables.
type catchRequest struct {
	plan Plan
	done chan error
}

// after waits for the answer's trace where the probe's outcome on this
// node lets an answer pass here: the probe was delivered, went into a
// tunnel, or left the pod network untranslated (a node's kernel that
// masquerades it undoes that on the answer before the answer enters the
// bridge, where it is caught). It stops it where no answer can pass, or
// none the catch knows: the probe was dropped here, or its source was
// translated in the pipeline (its answer comes back to the translated
// address). It returns the probe's outcome: the answer's lines are its
// own. A nil r has nothing to wait for.
func (r *ReplyRun) after(out Outcome, err error) (Outcome, error) {
	if r == nil {
		return out, err
	}
	a := out.Final().Action
	passes := a == report.ActionDelivered || a == report.ActionForwarded || a.Normalize() == report.ActionForwardedOutOfNetwork
	if err == nil && out.ExitCode == ExitOK && passes {
		why := ""
		switch {
		case out.KeptBack:
			why = "the helper did not let the probe go on to its destination (a hairpin back to its source, which it does not resume; see the trace's explanation), so nothing answered it"
		case out.SourceTranslated && !r.anyAddress.Load():
			why = "the probe's source was translated on this node's pipeline (SNAT): its answer comes back to the translated address, which the answer's catch does not know"
		}
		if why != "" {
			r.s.unfollowed.Store(&why)
			passes = false
		}
	}
	if r.done == nil || err != nil || out.ExitCode != ExitOK || !passes {
		r.cancel()
	}
	if r.done != nil {
		<-r.done
	}
	r.s.cleanup()
	r.cancel()
	return out, err
}

// Final is the last observation of the node's result (the zero value
// for none).
func (o Outcome) Final() report.Observation {
	obs := o.Result.Observations
	if len(obs) == 0 {
		return report.Observation{}
	}
	return obs[len(obs)-1]
}

// answerCatch is the catch flows for the answer to the probe to describes,
// and each flow's catch key (catchkeys.go).
func (s *session) answerCatch(to probe.ReplyTo) (Plan, []catchKey, error) {
	ca, err := openflow.ControllerAction(s.ctlID, userdata(s.c.Tag, kindCatch, 0, 0), true)
	if err != nil {
		return Plan{}, nil, err
	}
	actions := append(append(ca, setTagActions(s.c.Tag)...), openflow.ResubmitAction(0)...)
	v6 := to.Source.Is6()
	ethType, icmp := uint16(0x0800), uint8(1)
	echoReply, errs := uint8(0), []uint8{3, 11}
	if v6 {
		ethType, icmp, echoReply, errs = 0x86dd, 58, 129, []uint8{1, 3}
	}
	key := catchKey{ovs: s.ovsKey(), v6: v6, proto: icmp}
	base := append(openflow.EthTypeField(ethType), openflow.IPProtoField(icmp)...)
	if !to.AnyAddress {
		base = append(base, openflow.IPDstField(to.Source)...)
		key.dst = to.Source
	}
	var matches [][]byte
	var keys []catchKey
	icmpType := func(t uint8) {
		matches = append(matches, append(append([]byte(nil), base...), openflow.ICMPTypeField(v6, t)...))
		k := key
		k.num = uint16(t)
		keys = append(keys, k)
	}
	for _, t := range errs {
		icmpType(t)
	}
	switch to.Protocol {
	case probe.ICMP:
		icmpType(echoReply)
	case probe.TCP, probe.UDP:
		proto := uint8(6)
		if to.Protocol == probe.UDP {
			proto = 17
		}
		m := append(openflow.EthTypeField(ethType), openflow.IPProtoField(proto)...)
		if !to.AnyAddress {
			m = append(m, openflow.IPDstField(to.Source)...)
		}
		matches = append(matches, append(m, openflow.L4DstField(proto, to.SrcPort)...))
		keys = append(keys, s.portKey(to, proto))
	default:
		return Plan{}, nil, fmt.Errorf("no answer to follow for protocol %q", to.Protocol)
	}
	var p Plan
	for _, m := range matches {
		// The tag's own bit of a register every arriving packet has
		// clear: OVS checks overlap only between flows whose matches
		// differ (an identical flow replaces the other). The bit is the
		// tag's DSCP value's: its ECN variants are one run's, whose one
		// helper per node keeps their catches apart by catch keys.
		m = append(m, openflow.XReg7BitClearField(s.c.Tag)...)
		f := openflow.NewFlow(0, 0, answerCatchPriority, s.cookie|kindCatch, s.c.hardTimeout(), m, actions)
		openflow.SetFlowModFlags(f, openflow.FlagCheckOverlap)
		p.FlowMods = append(p.FlowMods, f)
	}
	return p, keys, nil
}

// portKey is the catch key of the answer to a TCP or UDP probe.
func (s *session) portKey(to probe.ReplyTo, proto uint8) catchKey {
	k := catchKey{ovs: s.ovsKey(), v6: to.Source.Is6(), proto: proto, num: to.SrcPort, dst: to.Source}
	if to.AnyAddress {
		k.dst = netip.Addr{}
	}
	return k
}

// followAnswer waits for the answer and follows it on this node. The
// answer leaves the catch flow with the reply tag in its DSCP: it is
// traced so.
func (s *session) followAnswer(ctx context.Context, catch Plan, answers func([]byte) (report.Answer, bool)) (Outcome, error) {
	pin, ok, err := s.waitCatch(ctx, catch)
	if err != nil || !ok {
		return s.unanswered(ctx, err)
	}
	a, _ := answers(pin.Packet)
	s.answer = &a
	if src, err := probe.Decode(pin.Packet); err == nil {
		// A translation of the answer's source (a Service's reply
		// un-DNATed) is reported as such.
		s.probeSrcIP = src.SrcIP
	}
	received := report.Observation{Component: report.ComponentForwarding, ComponentInfo: s.names.NameHop(ofproto.Hop{Table: 0, NoMatch: true}).Where, Action: report.ActionReceived}
	return s.follow(ctx, report.RoleReceiver, pin, nil, received, probe.WithTag(pin.Packet, s.c.Tag))
}

// unanswered ends an answer's trace that caught nothing.
func (s *session) unanswered(ctx context.Context, err error) (Outcome, error) {
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, err
	}
	res := report.NodeResult{Node: s.c.Node, Role: report.RoleReceiver}
	code := ExitTimeout
	ex := &report.Explanation{Summary: fmt.Sprintf("no answer to the probe passed this node within %s", s.c.Timeout)}
	if ctx.Err() != nil {
		ex.Summary = "no answer to the probe passed this node before the trace stopped following it"
	}
	if s.ignored > 0 {
		ex.Summary += fmt.Sprintf(" (%d packets to the probe's address and port were caught and were not its answer)", s.ignored)
	}
	uncaught := s.catches.missing()
	if len(uncaught) > 0 {
		ex.Summary += fmt.Sprintf("; answers of the kinds %s could not be caught here: another trace from the same source was catching them at the same time", strings.Join(uncaught, ", "))
	}
	var unfollowed string
	if why := s.unfollowed.Load(); why != nil {
		unfollowed, ex.Summary = *why, *why
	}
	if err := s.c.Out.Write(report.Line{Type: report.TypeResult, Result: &res, Explanation: ex, ExitCode: &code, Unfollowed: unfollowed, Uncaught: uncaught}); err != nil {
		return Outcome{}, err
	}
	return Outcome{ExitCode: code, Result: res}, nil
}
