package tracer

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// The answer to a probe that came in through the node's own stack
// (kernelentry.go) goes back the same way: the pipeline hands it to the
// node's stack (Antrea's antrea-gw0), whose connection for the probe undoes
// the DNAT, and the node routes it out of the uplink bridge it came in by.
// Leaving the integration bridge is not the end of its way back: the
// node's kernel could still drop it. So the answer's trace also watches
// the uplink bridge: a flow at the bridge's own port takes a copy of every
// packet that carries the answer's tag (the reply tag, which the kernel
// keeps) and sends it on as the bridge would have (a register bit of the
// tag's own keeps the flow from matching it again). The hop into the node's
// stack is then reported as forwarded, and the answer is back out once its
// copy arrives there, the bridge's output predicted by OVS's trace of it.
// Where no copy arrives within the timeout, the answer is lost in the
// node's stack, and the trace says so.

// stackExit is the uplink bridge the answer leaves by, watched through an
// OpenFlow connection of its own.
type stackExit struct {
	up *uplink
	of *openflow.Session
	// waiting: the answer went into the node's stack and its copy from
	// the uplink bridge has not come yet; seen: it has. closed: the
	// connection ended, and nothing more can come.
	waiting, seen, closed bool
}

// watchStackExit installs the uplink bridge's flows that take a copy of
// the answer as it comes out of the node's stack.
func (s *session) watchStackExit(ctx context.Context, up *uplink) error {
	of, err := openflow.Dial(ctx, filepath.Join(s.c.Rundir, up.bridge.Name+".mgmt"), s.ctlID, s.c.Logf)
	if err != nil {
		return err
	}
	ca, err := openflow.ControllerAction(s.ctlID, userdata(s.c.Tag, kindCopy, 0, 0), false)
	if err != nil {
		of.Close()
		return err
	}
	actions := append(append(ca, openflow.SetFieldAction(openflow.XReg7BitSetField(s.c.Tag))...), openflow.ResubmitAction(0)...)
	for _, et := range []uint16{0x0800, 0x86dd} {
		m := append(openflow.InPortField(openflow.PortNumber(up.local.Ofport)), openflow.EthTypeField(et)...)
		m = append(append(m, tagFields(s.c.Tag)...), openflow.XReg7BitClearField(s.c.Tag)...)
		if err := of.Send(openflow.NewFlow(of.NextXid(), 0, 0xffff, s.cookie|kindCopy, s.c.hardTimeout(), m, actions)); err != nil {
			of.Close()
			return err
		}
	}
	if err := of.Barrier(ctx); err != nil {
		of.Close()
		return err
	}
	s.stack = &stackExit{up: up, of: of}
	return nil
}

// stackPins is the uplink bridge's packet-ins, nil where it is not
// watched (a nil channel never delivers).
func (s *session) stackPins() <-chan openflow.PacketIn {
	if s.stack == nil || s.stack.seen || s.stack.closed {
		return nil
	}
	return s.stack.of.PacketIns()
}

// intoStack marks the final hop's observation o, where the answer leaves
// into the node's stack and the uplink bridge is watched: forwarded, not
// yet out.
func (w *watcher) intoStack(o *report.Observation, v Verdict) {
	if w.s.stack == nil || !intoKernel(v) {
		return
	}
	o.Action = report.ActionForwarded
	w.s.stack.waiting = true
}

// leftStack reports the answer's copy from the uplink bridge: it came out
// of the node's stack (as the node translated it back), and where OVS's
// trace of it sends it from there.
func (w *watcher) leftStack(ctx context.Context, pin openflow.PacketIn, ok bool) error {
	s, st := w.s, w.s.stack
	if !ok {
		st.closed = true
		s.c.Logf("the OpenFlow connection to %s closed: the answer's way out of the node's stack is not watched any more", st.up.bridge.Name)
		return nil
	}
	tag, _, _, _, mine := ParseUserdata(pin.Userdata)
	if !mine || tag != s.c.Tag || !s.isProbe(pin.Packet) {
		s.ignored++
		return nil
	}
	st.seen = true
	out := report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded,
		ComponentInfo: fmt.Sprintf("%s, from the node's own stack (%s)", st.up.bridge.Name, st.up.local.Name)}
	if sum, err := probe.Decode(pin.Packet); err == nil {
		out.TTL = int32(sum.TTL)
		out.ComponentInfo += fmt.Sprintf(", from %s to %s", sum.SrcIP, sum.DstIP)
	}
	if err := w.emit(ctx, out, nil); err != nil {
		return err
	}
	v, hop := s.stackOutput(ctx, st, pin.Packet)
	w.verdict = v
	o := report.Observation{Component: report.ComponentForwarding, Action: v.Action, Inferred: true,
		ComponentInfo: fmt.Sprintf("%s, %s", st.up.bridge.Name, v.Reason)}
	return w.emit(ctx, o, hop)
}

// stackOutput asks OVS for its trace of the answer as it came into the
// uplink bridge from the node's stack: out of the uplink (or another
// port), or dropped.
func (s *session) stackOutput(ctx context.Context, st *stackExit, frame []byte) (Verdict, *report.Hop) {
	f, err := probe.TraceFlow(frame)
	var t ofproto.Trace
	if err == nil {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t, err = s.ovs.Trace(tctx, st.up.bridge.Name, fmt.Sprintf("in_port=%d,", st.up.local.Ofport)+f, nil)
		cancel()
	}
	if err != nil {
		return Verdict{Action: report.ActionForwardedOutOfNetwork, PortName: st.up.bridge.Name,
			Reason: fmt.Sprintf("where it goes from there is not known (OVS's trace of it: %v)", err)}, nil
	}
	hop := otherBridgeHop(t.Hops)
	fate := ofproto.ParseDatapathActions(t.DatapathActions)
	if fate.Dropped() {
		return Verdict{Action: report.ActionDropped, Reason: fmt.Sprintf("dropped there (datapath actions %q)", t.DatapathActions)}, hop
	}
	name := ""
	if len(fate.Outputs) > 0 {
		if p, ok := t.Ports.Lookup(st.up.bridge.Name, fate.Outputs[0].Port); ok {
			name = p.Name
		}
	}
	if name == st.up.port.Name {
		return Verdict{Action: report.ActionForwardedOutOfNetwork, PortName: st.up.bridge.Name + "/" + name,
			Reason: fmt.Sprintf("out of its uplink %s towards the source", name)}, hop
	}
	return Verdict{Action: report.ActionForwardedOutOfNetwork, PortName: st.up.bridge.Name + "/" + name,
		Reason: fmt.Sprintf("out of %q, not its uplink %s (datapath actions %q)", name, st.up.port.Name, t.DatapathActions)}, hop
}

// closeStackExit deletes the uplink bridge's flows and closes its
// connection.
func (s *session) closeStackExit() {
	if s.stack == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	of := s.stack.of
	msg, err := openflow.DeleteByCookie(of.NextXid(), s.cookie, cookieMask)
	if err == nil {
		err = of.Send(msg)
	}
	if err == nil {
		err = of.Barrier(ctx)
	}
	if err != nil {
		s.c.Logf("cleanup: delete the flows with cookie %#x on %s: %v (they expire after %ds)", s.cookie, s.stack.up.bridge.Name, err, s.c.hardTimeout())
	}
	of.Close()
}
