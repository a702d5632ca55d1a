package tracer

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// A node whose uplink bridge has no patch port into the pipeline (the
// node's address on the bridge's own port: the lab's br-phy, a host whose
// NIC is an OVS bridge) hands a packet from outside to its own network
// stack, whose rules decide what happens next: Antrea's proxy with
// proxyAll DNATs a NodePort's packet (iptables, ipset ANTREA-NODEPORT-IP)
// to its virtual address and routes it into OVS through antrea-gw0
// (an externalIP is routed there untranslated); a kube-proxy's iptables
// DNAT it to an endpoint; with no rule the node answers or drops it
// itself.
//
// No prediction can say which: the helper sends the real probe into the
// uplink bridge from its uplink, as the outside's packet arrives, so that
// the node's kernel handles it with its real rules, and catches it, by its
// tag, where it enters the integration bridge (the receiver's catch flows:
// every arrival port). The kernel's connection tracking says what it did
// to the probe (its DNAT); the catch says where the probe came back into
// OVS, and from there every hop is observed. The uplink bridge's hop is
// OVS's prediction (inferred), as on the patch-port path.
//
// Where the kernel takes the probe for itself (its connection tracking
// shows no translation) or nothing tagged comes into the integration
// bridge within the timeout, what became of the probe is out of OVS's
// sight: the helper says so and the trace fails (exit 4) rather than
// guess.

// traceThroughKernel runs the trace of a probe from outside that enters
// the node's own stack first (up.local).
func (s *session) traceThroughKernel(ctx context.Context, spec TraceSpec, up *uplink, ps probe.Spec, pkt []byte) (Outcome, error) {
	if err := s.intoNodeStack(ctx, up, pkt); err != nil {
		return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
	}
	orig, ok := frameTuple(pkt)
	if !ok {
		return Outcome{ExitCode: ExitSetup}, setupErr("the probe has no connection tuple the node's kernel could track")
	}
	if k, err := openKernelCT(); err != nil {
		s.c.Logf("the node's connection tracking cannot be read (%v): what the kernel does to the probe is not reported", err)
	} else {
		s.kernel = k
	}
	reply, err := s.armReply(ctx, spec, ps, up)
	if err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, err)
	}
	catch, err := s.arrivalCatch()
	if err == nil {
		err = s.install(ctx, catch, true)
	}
	if err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, setupErr("%w", err))
	}
	if err := s.ready(report.RoleSender, len(catch.FlowMods), up.port.Name, string(ovsdb.MatchUplinkStack)); err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, err)
	}
	entry, hop := up.intoStack()
	if err := s.c.Out.Write(report.Line{Type: report.TypeObservation, Observation: &entry, Hop: hop}); err != nil {
		return reply.after(Outcome{}, err)
	}
	if err := s.injectUplink(ctx, up, pkt); err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, err)
	}
	pin, nat, ok, err := s.fromStack(ctx, catch, orig)
	if err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, err)
	}
	if !ok {
		return reply.after(Outcome{ExitCode: ExitSetup}, setupErr("the probe went into the node's own stack through %s and nothing with its tag came into %s within %s%s: the kernel kept it, dropped it or sent it elsewhere, out of OVS's sight",
			up.local.Name, s.br.Name, s.c.Timeout, nat.explain()))
	}
	how := nat.explain()
	if at, ok := frameTuple(pin.Packet); ok && !nat.translated && at.Dst == orig.Dst && at.DstPort == orig.DstPort {
		how = fmt.Sprintf(", its destination %s unchanged%s", orig.Dst, how)
	}
	kernel := report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded,
		ComponentInfo: fmt.Sprintf("the node's kernel, from %s into %s through %s%s", up.local.Name, s.br.Name, inPortName(s, pin.Metadata.InPort), how)}
	if nat.translated {
		kernel.TranslatedDstIP = nat.to.Addr().String()
	}
	if err := s.c.Out.Write(report.Line{Type: report.TypeObservation, Observation: &kernel}); err != nil {
		return reply.after(Outcome{}, err)
	}
	received := report.Observation{Component: report.ComponentForwarding, ComponentInfo: s.names.NameHop(ofproto.Hop{Table: 0, NoMatch: true}).Where, Action: report.ActionReceived}
	out, err := s.follow(ctx, report.RoleSender, pin, []report.Observation{entry, kernel}, received, pin.Packet)
	return reply.after(out, err)
}

// intoNodeStack asks OVS for its trace of the probe entering the uplink
// bridge from its uplink and says whether the bridge hands it, unchanged,
// to its own port, the node's stack, and nowhere else.
func (s *session) intoNodeStack(ctx context.Context, up *uplink, pkt []byte) error {
	t, err := s.traceFromUplink(ctx, up, pkt)
	if err != nil {
		return err
	}
	up.hops = t.Hops
	fate := ofproto.ParseDatapathActions(t.DatapathActions)
	if a := rewrite(t.Hops); a != "" {
		return fmt.Errorf("%s's flows change the probe before it reaches the node's stack (%q): a packet from outside is not what arrives there", up.bridge.Name, a)
	}
	if fate.Recirc || fate.Controller || len(fate.Outputs) != 1 {
		return fmt.Errorf("OVS's trace of the probe on %s, from its uplink %s, does not hand it to the node's stack alone (datapath actions %q): where it goes is not followed", up.bridge.Name, up.port.Name, t.DatapathActions)
	}
	if t.Ports == nil {
		return fmt.Errorf("OVS did not list its datapath ports (dpif/show): the port the trace of the probe on %s sends it to cannot be named", up.bridge.Name)
	}
	p, ok := t.Ports.Lookup(up.bridge.Name, fate.Outputs[0].Port)
	if !ok || p.Bridge != up.bridge.Name || p.Name != up.local.Name {
		return fmt.Errorf("OVS's trace of the probe on %s, from its uplink %s, sends it out of datapath port %d (%s), not to the bridge's own port %s where the node's address is: it does not reach this node",
			up.bridge.Name, up.port.Name, fate.Outputs[0].Port, p.Name, up.local.Name)
	}
	return nil
}

// intoStack is the uplink bridge's hop that hands the probe to the node's
// own stack, as OVS's trace predicts it: reported first, and inferred.
func (up *uplink) intoStack() (report.Observation, *report.Hop) {
	o := report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded, Inferred: true,
		ComponentInfo: fmt.Sprintf("%s, from its uplink %s to the node's own stack (%s)", up.bridge.Name, up.port.Name, up.local.Name)}
	return o, otherBridgeHop(up.hops)
}

// injectUplink sends the probe into the uplink bridge as if it arrived on
// the uplink, through a connection of its own to that bridge.
func (s *session) injectUplink(ctx context.Context, up *uplink, pkt []byte) error {
	of, err := openflow.Dial(ctx, filepath.Join(s.c.Rundir, up.bridge.Name+".mgmt"), s.ctlID, s.c.Logf)
	if err != nil {
		return setupErr("%w", err)
	}
	defer of.Close()
	po, err := openflow.PacketOut(of.NextXid(), uint32(up.port.Ofport), pkt) //nolint:gosec // ofport > 0 checked
	if err == nil {
		err = of.Send(po)
	}
	if err == nil {
		err = of.Barrier(ctx)
	}
	if err != nil {
		return setupErr("inject the probe into %s: %w", up.bridge.Name, err)
	}
	return nil
}

// fromStack waits for the probe to come into the integration bridge from
// the node's stack, and reads what the kernel did to it. A probe that
// comes back does so within moments, its connection (if the kernel tracks
// it) made by then; one that has not after kernelConnWait is looked for in
// the kernel's connections: kept for the node itself, it ends the wait.
// The probe stays paused in OVS while the kernel's connections are read.
func (s *session) fromStack(ctx context.Context, catch Plan, orig ctTuple) (openflow.PacketIn, kernelNAT, bool, error) {
	pin, ok, err := s.waitCatchWithin(ctx, catch, kernelConnWait)
	if err != nil {
		return pin, kernelNAT{}, false, err
	}
	if ok {
		nat, _ := s.kernelHandling(orig, time.Now().Add(kernelEventWait))
		return pin, nat, true, nil
	}
	nat, err := s.kernelHandling(orig, time.Now().Add(kernelEventWait))
	if err != nil {
		return pin, nat, false, err
	}
	pin, ok, err = s.waitCatchWithin(ctx, catch, s.c.Timeout-kernelConnWait)
	return pin, nat, ok, err
}

// kernelEventWait bounds the read of the kernel's announcement of the
// probe's connection once the probe has passed the kernel: made by then,
// the announcement waits in the socket already.
const kernelEventWait = 50 * time.Millisecond

// kernelNAT is what the node's connection tracking says the kernel did to
// the probe.
type kernelNAT struct {
	// known: the kernel tracks the probe's connection.
	known      bool
	translated bool
	// to is the address and port the kernel sends the probe to.
	to    netip.AddrPort
	reply string
}

func (n kernelNAT) explain() string {
	switch {
	case !n.known:
		return ""
	case n.translated:
		return fmt.Sprintf(", DNAT to %s (its connection tracking: the answer comes back as %s)", n.to, n.reply)
	}
	return ""
}

// kernelHandling reads the connection the node's kernel made for the
// probe, waiting until deadline for the kernel to announce it. A connection with no destination translation is the kernel's
// own: the probe is for the node itself, and does not come back into OVS
// as a packet for the pipeline to follow; that ends the trace.
func (s *session) kernelHandling(orig ctTuple, deadline time.Time) (kernelNAT, error) {
	if s.kernel == nil {
		return kernelNAT{}, nil
	}
	e, made, err := s.kernel.probeConn(orig, deadline)
	if err != nil {
		s.c.Logf("the node's kernel: no tracked connection for the probe (%s): %v", orig, err)
		return kernelNAT{}, nil
	}
	if made {
		s.kernelConn = &e.Orig
	}
	s.c.Logf("the node's kernel tracks the probe as %s, answered as %s", e.Orig, e.Reply)
	n := kernelNAT{known: true, to: netip.AddrPortFrom(e.Reply.Src, e.Reply.SrcPort), reply: e.Reply.String()}
	n.translated = e.DestinationTranslated()
	if !n.translated && nodeHolds(orig.Dst) {
		return n, setupErr("the probe went into the node's own stack and the kernel took it for itself, untranslated (its connection tracking: %s): no NodePort rule (a kube-proxy's, a CNI's) sends it on, and what the node does with it (answers, refuses or drops it) is out of OVS's sight", e.Orig)
	}
	return n, nil
}

// nodeHolds says whether one of the node's interfaces holds addr: a
// packet to it that the kernel does not translate is the node's own. (One
// to another address is routed on, into OVS or elsewhere: the catch says.)
func nodeHolds(addr netip.Addr) bool {
	list, err := net.InterfaceAddrs()
	return err == nil && slices.Contains(netAddrs(list), addr.Unmap())
}

// arrivalCatch is the receiver's catch: the probe's tag arriving on any
// port of the bridge that is no pod's (tunnels, the gateway, uplinks).
func (s *session) arrivalCatch() (Plan, error) {
	arrivals := s.br.Arrivals()
	if len(arrivals) == 0 {
		return Plan{}, fmt.Errorf("bridge %s has no tunnel, gateway or uplink port: nothing can arrive from other nodes", s.c.Bridge)
	}
	ca, err := openflow.ControllerAction(s.ctlID, userdata(s.c.Tag, kindCatch, 0, 0), true)
	if err != nil {
		return Plan{}, err
	}
	actions := append(ca, openflow.ResubmitAction(0)...)
	var catch Plan
	for _, tp := range arrivals {
		for _, et := range []uint16{0x0800, 0x86dd} {
			m := append(openflow.InPortField(openflow.PortNumber(tp.Ofport)), openflow.EthTypeField(et)...)
			m = append(m, tagFields(s.c.Tag)...)
			catch.FlowMods = append(catch.FlowMods, openflow.NewFlow(0, 0, 0xffff, s.cookie|kindCatch, s.c.hardTimeout(), m, actions))
		}
	}
	return catch, nil
}

// inPortName is the name of the bridge's port ofport, or its number.
func inPortName(s *session, ofport uint32) string {
	if p := s.br.ByOfport(strconv.FormatUint(uint64(ofport), 10)); p != nil {
		return p.Name
	}
	return fmt.Sprintf("port %d", ofport)
}
