package tracer

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Receive waits for the tagged probe to arrive from another node (through a
// tunnel, or routed through the gateway or an uplink) and reports what this
// node does with it.
//
// The helper cannot know the probe in advance, so a catch flow in table 0
// (highest priority, an arrival port's in_port, the tag) pauses the real packet and
// sends it up with its tunnel metadata. The helper removes the catch
// flows, asks OVS for its trace of exactly that packet, installs the tagged
// copies of the path's flows, and resumes the packet, whose remaining
// action, resubmit(,0), sends it through table 0 again: this time through
// the copies, so that it reports hop by hop and goes where it would have.
// (The catch flows are gone by then, so the resubmit cannot catch the
// packet again.) Should the CNI's agent delete the catch flows while the
// receiver waits (an agent that replaces the bridge's flows on every
// resync does), the receiver puts them back (restore.go).
func Receive(ctx context.Context, c Common) (Outcome, error) {
	s, err := open(ctx, c)
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, err
	}
	defer s.cleanup()
	catch, err := s.arrivalCatch()
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
	}
	var reply *ReplyRun
	if c.ReplyTag != 0 {
		if reply, err = openReply(ctx, s); err != nil {
			return Outcome{ExitCode: ExitSetup}, err
		}
	}
	if err := s.install(ctx, catch, true); err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, setupErr("%w", err))
	}
	if err := s.ready(report.RoleReceiver, len(catch.FlowMods), "", ""); err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, err)
	}
	pin, ok, err := s.waitCatch(ctx, catch)
	if err != nil || !ok {
		return reply.after(s.notSeen(err))
	}
	if reply != nil {
		// The answer is armed for before the probe goes on to its
		// destination, whose kernel answers at once.
		if to, ok := probe.ReplyToFrame(pin.Packet); ok {
			if err := reply.Arm(to); err != nil {
				_ = s.of.Send(openflow.Resume(s.of.NextXid(), pin))
				return reply.after(Outcome{ExitCode: ExitSetup}, err)
			}
		}
	}
	received := report.Observation{Component: report.ComponentForwarding, ComponentInfo: s.names.NameHop(ofproto.Hop{Table: 0, NoMatch: true}).Where, Action: report.ActionReceived}
	out, err := s.follow(ctx, report.RoleReceiver, pin, nil, received, pin.Packet)
	return reply.after(out, err)
}

// follow traces a packet a catch flow paused, installs the copies of its
// path, resumes it and watches it as role, the observations already
// reported (pre) and the catch's (received) first. frame is the packet as
// the catch flow's remaining actions leave it. From here on the packet
// waits in OVS: be quick, and resume it on every path so that it is not
// silently lost.
func (s *session) follow(ctx context.Context, role report.Role, pin openflow.PacketIn, pre []report.Observation, received report.Observation, frame []byte) (Outcome, error) {
	md := pin.Metadata
	flow := fmt.Sprintf("in_port=%d", md.InPort) + tunnelFlow(md)
	if sum, err := probe.Decode(pin.Packet); err == nil {
		received.TTL = int32(sum.TTL)
	}
	if err := s.c.Out.Write(report.Line{Type: report.TypeObservation, Observation: &received, Answer: s.answer}); err != nil {
		return Outcome{}, err
	}
	s.forget(kindCatch)
	del, _ := openflow.DeleteByCookie(s.of.NextXid(), s.cookie|kindCatch, ^uint64(0))
	if err := s.of.Send(del); err != nil {
		return Outcome{ExitCode: ExitSetup}, setupErr("remove catch flows: %w", err)
	}
	if err := s.of.Barrier(ctx); err != nil {
		_ = s.of.Send(openflow.Resume(s.of.NextXid(), pin))
		return Outcome{ExitCode: ExitSetup}, setupErr("remove catch flows: %w", err)
	}
	t, err := s.trace(ctx, flow, frame)
	if err != nil {
		_ = s.of.Send(openflow.Resume(s.of.NextXid(), pin))
		return Outcome{ExitCode: ExitSetup}, setupErr("ask OVS for its trace of the caught packet: %w", err)
	}
	sum, _ := probe.Decode(frame)
	ethType := uint16(0x0800)
	if sum.DstIP.Is6() {
		ethType = 0x86dd
	}
	p := &path{t: t, ethType: ethType}
	_, err = s.plan(ctx, p, 0, true)
	if rerr := s.of.Send(openflow.Resume(s.of.NextXid(), pin)); rerr != nil && err == nil {
		err = fmt.Errorf("resume the caught packet: %w", rerr)
	}
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
	}
	var dst netip.Addr
	if sum.DstIP.IsValid() {
		dst = sum.DstIP
	}
	return s.watch(ctx, role, p, dst, append(pre, received))
}

func (s *session) waitCatch(ctx context.Context, catch Plan) (openflow.PacketIn, bool, error) {
	return s.waitCatchWithin(ctx, catch, s.c.Timeout)
}

// waitCatchWithin is waitCatch for at most d.
func (s *session) waitCatchWithin(ctx context.Context, catch Plan, d time.Duration) (openflow.PacketIn, bool, error) {
	timer := newTimer(d)
	defer timer.Stop()
	for {
		select {
		case pin, ok := <-s.of.PacketIns():
			if !ok {
				return pin, false, setupErr("OpenFlow connection closed while waiting for the probe")
			}
			tag, kind, _, _, ok := ParseUserdata(pin.Userdata)
			if !ok || tag != s.c.Tag || kind != kindCatch {
				s.foreign++
				continue
			}
			if s.isProbe(pin.Packet) {
				return pin, true, nil
			}
			// Another packet with the tag (IPv4 identification cannot be
			// matched in OpenFlow): let it go on without catching it again,
			// then catch again.
			s.ignored++
			if sum, err := probe.Decode(pin.Packet); err == nil {
				s.c.Logf("caught a packet %s -> %s (tag %s, mark %#x) that is not the one this trace follows: let go", sum.SrcIP, sum.DstIP, dscp.Name(sum.Tag), sum.Mark)
			}
			s.forget(kindCatch)
			del, _ := openflow.DeleteByCookie(s.of.NextXid(), s.cookie|kindCatch, ^uint64(0))
			if err := s.of.Send(del); err != nil {
				return pin, false, err
			}
			if err := s.of.Barrier(ctx); err != nil {
				return pin, false, err
			}
			_ = s.of.Send(openflow.Resume(s.of.NextXid(), pin))
			if err := s.install(ctx, catch, false); err != nil {
				return pin, false, err
			}
		case req := <-s.extraCatch:
			// More to catch (an answer's translated address): in the
			// tables before the probe goes on.
			catch.FlowMods = append(catch.FlowMods, req.plan.FlowMods...)
			req.done <- s.install(ctx, req.plan, false)
		case fr := <-s.flowRemoved():
			// The CNI's agent may have replaced the bridge's flows,
			// catch flows included: put them back.
			if err := s.onFlowRemoved(ctx, fr); err != nil {
				return openflow.PacketIn{}, false, setupErr("%w", err)
			}
		case <-timer.C:
			return openflow.PacketIn{}, false, nil
		case <-ctx.Done():
			return openflow.PacketIn{}, false, nil
		}
	}
}

func (s *session) notSeen(err error) (Outcome, error) {
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, err
	}
	res := report.NodeResult{Node: s.c.Node, Role: report.RoleReceiver}
	code := ExitTimeout
	ex := &report.Explanation{Summary: fmt.Sprintf("no packet with tag %s arrived from another node within %s", dscp.Name(s.c.Tag), s.c.Timeout)}
	if err := s.c.Out.Write(report.Line{Type: report.TypeResult, Result: &res, Explanation: ex, ExitCode: &code}); err != nil {
		return Outcome{}, err
	}
	return Outcome{ExitCode: code, Result: res}, nil
}

func newTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }
