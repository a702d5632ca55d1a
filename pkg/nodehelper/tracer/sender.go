package tracer

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// TraceSpec says what to inject where.
type TraceSpec struct {
	Common
	// SourcePod is "namespace/name"; or InPort names the OVS port; or
	// SourceNode injects as the node itself (nodesource.go).
	SourcePod  string
	InPort     string
	SourceNode bool
	// SourceOutside injects as a packet from SourceIP, outside the
	// cluster, arriving on the node's uplink (outside.go).
	SourceOutside bool
	// ReplyTranslated: the destination is outside the pod network and
	// answers from its own address, to whatever address and port the
	// pipeline translated the probe's source to on its way out (a
	// gateway router's SNAT): the answer is caught there too
	// (ReplyRun.ArmTranslated), as each continuation shows the probe.
	ReplyTranslated bool
	// nextHop is, for SourceNode, the address the node's kernel sends
	// to: the destination, or its route's gateway.
	nextHop netip.Addr
	// SourceIP and SourceMAC override what OVSDB records for the port.
	SourceIP  netip.Addr
	SourceMAC net.HardwareAddr
	// DestinationMAC overrides the probe's destination MAC.
	DestinationMAC net.HardwareAddr
	Destination    netip.Addr
	Protocol       probe.Protocol
	// SrcPort is the TCP or UDP source port; 0 picks a random one.
	SrcPort uint16
	DstPort uint16
	// TCPFlags is the flags byte as sent (0x02 for SYN; 0 is no flag).
	TCPFlags uint8
	TTL      uint8
}

// Trace injects a tagged probe at the source port and reports what this
// node does with it.
func Trace(ctx context.Context, spec TraceSpec) (Outcome, error) {
	s, err := open(ctx, spec.Common)
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, err
	}
	defer s.cleanup()
	var up *uplink
	var src *ovsdb.Port
	var match ovsdb.Match
	if spec.SourceOutside {
		src, up, err = s.outsideSource(&spec, KernelRoute)
		match = ovsdb.MatchUplink
	} else {
		src, match, err = sourcePort(s.br, &spec, KernelRoute)
	}
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
	}
	if spec.DestinationMAC == nil {
		spec.DestinationMAC = s.destinationMAC(ctx, src, spec)
	}
	ps, err := probeSpec(s.br, src, spec, s.c.Random())
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
	}
	s.holdSourcePort(ctx, &ps, spec)
	s.probeSrcPort, s.probeSrcIP = ps.SrcPort, ps.SrcIP
	pkt, err := probe.Build(ps)
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
	}
	s.timed("source port")
	if up != nil && up.local != nil {
		return s.traceThroughKernel(ctx, spec, up, ps, pkt)
	}
	if up != nil {
		if err := s.throughUplink(ctx, up, src, pkt); err != nil {
			return Outcome{ExitCode: ExitSetup}, setupErr("%w", err)
		}
	}
	md := fmt.Sprintf("in_port=%d", src.Ofport)
	if s.hostMark = hostMark(spec, s.tables, s.br.DatapathType); s.hostMark != 0 {
		md += fmt.Sprintf(",pkt_mark=%#x", s.hostMark)
		s.c.Logf("the probe carries pkt_mark %#x, as the node's own packets do: Antrea's iptables mark what the node sends out of its gateway, and the kernel datapath (%q) carries the mark into OVS", s.hostMark, s.br.DatapathType)
	}
	t, err := s.trace(ctx, md, pkt)
	if err != nil {
		return Outcome{ExitCode: ExitSetup}, setupErr("ask OVS for its trace of the probe: %w", err)
	}
	s.timed("ofproto/trace")
	s.watchKernel(t)
	ethType := uint16(0x0800)
	if ps.DstIP.Is6() {
		ethType = 0x86dd
	}
	p := &path{t: t, ethType: ethType}
	reply, err := s.armReply(ctx, spec, ps, nil)
	if err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, err)
	}
	if reply != nil {
		s.timed("answer's catch")
	}
	// Only passes after a recirculation go through the datapath's cache:
	// the packet-out's first pass is translated afresh. The answer's catch
	// flows meet a pod's packet, which does.
	plan, err := s.plan(ctx, p, 0, recirculates(t) || reply != nil)
	if err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, setupErr("%w", err))
	}
	if err := s.ready(report.RoleSender, len(plan.FlowMods), src.Name, string(match)); err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, err)
	}
	pre, err := s.inject(up, src, pkt)
	if err != nil {
		return reply.after(Outcome{ExitCode: ExitSetup}, err)
	}
	return reply.after(s.watch(ctx, report.RoleSender, p, ps.DstIP, pre))
}

// armReply opens the catch for the destination's answer when the trace
// follows it (a reply tag), and returns nil otherwise. A nil ReplyRun's
// after passes its outcome through, so callers use it either way. Where
// the probe came in through the node's own stack (stack), the answer's
// way out of it is watched too (stackexit.go).
func (s *session) armReply(ctx context.Context, spec TraceSpec, ps probe.Spec, stack *uplink) (*ReplyRun, error) {
	if s.c.ReplyTag == 0 {
		return nil, nil
	}
	reply, err := openReply(ctx, s)
	if err != nil {
		return nil, err
	}
	reply.sender = true
	if stack != nil {
		if err := reply.s.watchStackExit(ctx, stack); err != nil {
			return reply, setupErr("watch %s for the answer: %w", stack.bridge.Name, err)
		}
	}
	to := ps.Reply()
	// From outside, the gateway router may translate the probe's
	// source (a NodePort's SNAT): its answer is known by its ports.
	to.AnyAddress = spec.SourceOutside
	if err := reply.Arm(to); err != nil {
		return reply, err
	}
	s.translated = func(frame []byte) {
		if spec.ReplyTranslated {
			reply.ArmTranslated(frame, ps.SrcIP, ps.DstIP)
		}
		reply.ArmMovedPort(frame, ps.SrcIP)
	}
	return reply, nil
}

// inject sends the probe into the bridge at src. From outside, the
// uplink bridge's flow that led it there is reported first, and
// returned as the path's first observation.
func (s *session) inject(up *uplink, src *ovsdb.Port, pkt []byte) ([]report.Observation, error) {
	var pre []report.Observation
	if up != nil {
		o, hop := up.entry(src)
		if err := s.c.Out.Write(report.Line{Type: report.TypeObservation, Observation: &o, Hop: hop}); err != nil {
			return nil, err
		}
		pre = append(pre, o)
	}
	po, err := openflow.PacketOutMarked(s.of.NextXid(), uint32(src.Ofport), s.hostMark, pkt) //nolint:gosec // ofport > 0 checked
	if err == nil {
		err = s.of.Send(po)
	}
	if err != nil {
		return nil, setupErr("inject the probe: %w", err)
	}
	return pre, nil
}

// sourcePort is the port the probe enters through; for a probe from the
// node, route is asked how the node sends to the destination.
func sourcePort(br *ovsdb.Bridge, spec *TraceSpec, route func(netip.Addr) (Route, error)) (*ovsdb.Port, ovsdb.Match, error) {
	var p *ovsdb.Port
	var m ovsdb.Match
	var err error
	switch {
	case spec.SourceNode:
		var r Route
		if r, err = route(spec.Destination); err != nil {
			return nil, "", fmt.Errorf("the node's route to %s: %w", spec.Destination, err)
		}
		p, spec.nextHop, err = nodeSource(br, spec, r)
		m = ovsdb.MatchNodeRoute
	case spec.SourcePod != "":
		ns, name, ok := strings.Cut(spec.SourcePod, "/")
		if !ok || ns == "" || name == "" {
			return nil, "", fmt.Errorf("--source-pod %q: want NAMESPACE/NAME", spec.SourcePod)
		}
		p, m, err = br.FindPod(ns, name)
	case spec.InPort != "":
		p, err = br.FindPort(spec.InPort)
		m = ovsdb.MatchPortNam
	default:
		return nil, "", fmt.Errorf("say where the probe enters: --source-pod NAMESPACE/NAME, --in-port OVS_PORT or --source-node")
	}
	if err != nil {
		return nil, "", err
	}
	if p.Ofport <= 0 {
		return nil, "", fmt.Errorf("port %s has no OpenFlow port number (ofport %d): OVS could not add it", p.Name, p.Ofport)
	}
	return p, m, nil
}

// probeSpec says what the probe looks like. Its 5-tuple is fresh for every
// trace (a random source port or ICMP id, unless --src-port says
// otherwise): a tuple that repeats an earlier trace's would meet that
// trace's conntrack entry and could take another path than OVS's trace of
// a new connection predicts.
func probeSpec(br *ovsdb.Bridge, src *ovsdb.Port, spec TraceSpec, random uint32) (probe.Spec, error) {
	ps := probe.Spec{
		DstIP: spec.Destination, Protocol: spec.Protocol, SrcPort: spec.SrcPort, DstPort: spec.DstPort,
		TCPFlags: spec.TCPFlags, Tag: spec.Tag, Mark: spec.Mark, TTL: spec.TTL, ICMPID: uint16(random >> 16), ICMPSeq: 1, //nolint:gosec // the high half
	}
	if !ps.DstIP.IsValid() {
		return ps, fmt.Errorf("--destination is required")
	}
	ps.SrcIP, ps.SrcMAC = sourceAddrs(src, spec)
	if !ps.SrcIP.IsValid() {
		return ps, fmt.Errorf("port %s records no %s address in external_ids (ip, ip_addresses or ip-address): pass --source-ip", src.Name, family(ps.DstIP))
	}
	if ps.SrcMAC == nil {
		return ps, fmt.Errorf("port %s records no pod MAC in external_ids (mac, attached_mac or attached-mac): pass --source-mac", src.Name)
	}
	ps.DstMAC = spec.DestinationMAC
	if ps.DstMAC == nil {
		// A local destination pod gets its own MAC; anything else the
		// gateway's, as a pod's routed packet would carry.
		if p := br.PortByIP(ps.DstIP); p != nil && p.PodMAC() != nil {
			ps.DstMAC = p.PodMAC()
		} else if gw := br.Gateway(); gw != nil && !spec.SourceNode {
			ps.DstMAC, _ = net.ParseMAC(gw.MAC)
		}
	}
	if ps.DstMAC == nil && spec.SourceNode {
		return ps, fmt.Errorf("cannot tell the MAC the node puts on its packets to %s (its next hop %s is in neither the kernel's ARP table nor answered by the pipeline): pass --destination-mac", ps.DstIP, spec.nextHop)
	}
	if ps.DstMAC == nil {
		return ps, fmt.Errorf("cannot tell the probe's destination MAC (no local pod with IP %s, no gateway port): pass --destination-mac", ps.DstIP)
	}
	if ps.SrcPort == 0 && ps.Protocol != probe.ICMP {
		// 61000-65535: above Linux's default ephemeral range (32768-60999),
		// where the pods' own connections take their ports. A destination
		// that still holds an earlier connection on the probe's ports
		// answers its SYN with an ACK of that connection (measured: 2 of 40
		// probes from 49152-60999 beside a loop of real connections).
		ps.SrcPort = probeSrcPortLow + uint16(random%(65536-probeSrcPortLow)) //nolint:gosec // bounded
	}
	return ps, nil
}

// sourceAddrs is the probe's source IP (of the destination's family) and
// MAC: the flags', else what the CNI recorded for the source port.
func sourceAddrs(src *ovsdb.Port, spec TraceSpec) (netip.Addr, net.HardwareAddr) {
	ip, mac := spec.SourceIP, spec.SourceMAC
	if !ip.IsValid() {
		for _, a := range src.PodIPs() {
			if a.Is4() == spec.Destination.Is4() {
				ip = a
				break
			}
		}
	}
	if mac == nil {
		mac = src.PodMAC()
	}
	return ip, mac
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// holdSourcePort takes the catch key of a round trip's TCP or UDP probe's
// answer, at its source port (catchkeys.go): a random port is drawn again
// until no other trace from the same source catches answers at it; a
// port the user gave is waited for, at most keyWait. A port
// not taken is still the probe's: the answer's trace then says it could
// not catch the answer.
func (s *session) holdSourcePort(ctx context.Context, ps *probe.Spec, spec TraceSpec) {
	if s.c.ReplyTag == 0 || (ps.Protocol != probe.TCP && ps.Protocol != probe.UDP) {
		return
	}
	proto := uint8(6)
	if ps.Protocol == probe.UDP {
		proto = 17
	}
	owner := s.c.ReplyTag
	key := func() catchKey {
		to := ps.Reply()
		to.AnyAddress = spec.SourceOutside
		return s.portKey(to, proto)
	}
	if spec.SrcPort == 0 {
		for range 64 {
			if got := liveCatches.try(owner, []catchKey{key()}); len(got) == 1 {
				s.catches.took(owner, got)
				return
			}
			ps.SrcPort = probeSrcPortLow + uint16(s.c.Random()%(65536-probeSrcPortLow)) //nolint:gosec // bounded
		}
	}
	k := key()
	bound := keyWait(s.c.Timeout)
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := liveCatches.wait(wctx, owner, []catchKey{k}); err != nil {
		s.c.Logf("another trace from %s catches its answers at port %d: waited %s for it", ps.SrcIP, ps.SrcPort, bound)
		return
	}
	s.catches.took(owner, []catchKey{k})
}

// probeSrcPortLow is the lowest source port a probe picks (probeSpec).
const probeSrcPortLow = 61000

func recirculates(t ofproto.Trace) bool {
	for _, h := range t.Hops {
		if h.Pass > 0 {
			return true
		}
	}
	return false
}
