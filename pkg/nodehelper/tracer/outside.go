package tracer

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// A probe from outside the cluster (--source-outside) enters the node where
// a packet from that address does: on the node's uplink, into the OVS
// bridge that holds the uplink (OVN-Kubernetes' breth0 in its shared
// gateway mode), whose flows send what is for the cluster (a NodePort, an
// externalIP) through a patch port into the integration bridge and the
// rest to the node's own kernel. The helper asks the node's kernel how it
// reaches the source (the route's interface must be the uplink bridge's
// own port: that is where the node's address lives and the outside's
// packets arrive), asks OVS for its trace of the probe entering that bridge
// from its uplink, and only where the trace sends it through the patch
// port injects it into the integration bridge at the patch's peer, as it
// leaves the uplink bridge. The uplink bridge's hop is OVS's prediction
// (reported as inferred); everything after it is observed.
//
// A bridge with no patch port into the integration bridge hands the
// outside's packets for the node to the node's own stack: the probe is
// sent through it (kernelentry.go). Where the node's route to the source
// is not through such a bridge, or a bridge with a patch port hands the
// probe to the node's kernel instead (no NodePort flow for it), the
// helper says so and injects nothing.

// uplink is where the outside's packets enter: the uplink bridge, its port
// to the outside, and the uplink bridge's hops of the probe. local is set
// where the bridge has no patch port into the pipeline and its own port
// (the node's address) is where the outside's packets go: into the node's
// own stack first (kernelentry.go).
type uplink struct {
	bridge *ovsdb.Bridge
	port   ovsdb.Port
	hops   []ofproto.Hop
	local  *ovsdb.Port
}

// outsideSource finds where a packet from spec.SourceIP to the node enters
// the integration bridge, and fills in the probe's MACs where the flags
// left them out: from the outside's next hop (the node's ARP table) to the
// uplink bridge's own port.
func (s *session) outsideSource(spec *TraceSpec, route func(netip.Addr) (Route, error)) (*ovsdb.Port, *uplink, error) {
	if !spec.SourceIP.IsValid() {
		return nil, nil, fmt.Errorf("--source-outside needs --source-ip: the outside address the probe comes from")
	}
	r, err := route(spec.SourceIP)
	if err != nil {
		return nil, nil, fmt.Errorf("the node's route to %s: %w", spec.SourceIP, err)
	}
	up, patch, err := uplinkBridge(s.node, s.br, r.Dev)
	if err != nil {
		return nil, nil, fmt.Errorf("the node reaches %s through %s: %w", spec.SourceIP, r.Dev, err)
	}
	in := &up.port
	if up.local == nil {
		if in, err = s.br.FindPort(patch.Options["peer"]); err != nil {
			return nil, nil, fmt.Errorf("the peer of %s's patch port %s: %w", up.bridge.Name, patch.Name, err)
		}
		if in.Ofport <= 0 || patch.Ofport <= 0 {
			return nil, nil, fmt.Errorf("the patch ports %s and %s have no OpenFlow port numbers (ofport %d, %d): OVS could not add them", patch.Name, in.Name, patch.Ofport, in.Ofport)
		}
	}
	if spec.SourceMAC == nil {
		next := r.NextHop(spec.SourceIP)
		spec.SourceMAC = arpTableMAC(next, r.Dev)
		if spec.SourceMAC == nil {
			return nil, nil, fmt.Errorf("the node has no ARP entry for %s on %s, the outside's next hop to %s: send it a packet first (ping %s from the node), or pass --source-mac", next, r.Dev, spec.SourceIP, next)
		}
	}
	if spec.DestinationMAC == nil {
		spec.DestinationMAC = r.MAC
	}
	return in, up, nil
}

// uplinkBridge is the OVS bridge whose own (internal) port is dev, with a
// port of its own to the outside and a patch port into br: the uplink
// bridge, and that patch port. A bridge with no such patch port hands
// the outside's packets for the node's address to the node's own stack
// (dev): the uplink is returned with local set, and no patch port.
func uplinkBridge(node *ovsdb.Node, br *ovsdb.Bridge, dev string) (*uplink, ovsdb.Port, error) {
	if _, err := br.FindPort(dev); err == nil {
		return nil, ovsdb.Port{}, fmt.Errorf("%s is a port of %s itself: a packet from outside reaches the node's kernel first, which decides where it goes (a kube-proxy's rules, say), out of OVS's sight", dev, br.Name)
	}
	for i := range node.Bridges {
		b := &node.Bridges[i]
		if b.Name == br.Name || !slices.ContainsFunc(b.Ports, func(p ovsdb.Port) bool { return p.Name == dev && p.Type == "internal" }) {
			continue
		}
		var up []ovsdb.Port
		var patch, local *ovsdb.Port
		for j, p := range b.Ports {
			switch {
			case p.Type == "patch" && p.Options["peer"] != "":
				if _, err := br.FindPort(p.Options["peer"]); err == nil {
					patch = &b.Ports[j]
				}
			case p.Name == dev:
				local = &b.Ports[j]
			case (p.Type == "" || p.Type == "system" || p.Type == "dpdk") && p.Ofport > 0:
				up = append(up, p)
			}
		}
		if len(up) != 1 {
			return nil, ovsdb.Port{}, fmt.Errorf("bridge %s has %d ports to the outside (want one uplink): cannot tell where the outside's packets arrive", b.Name, len(up))
		}
		if patch == nil {
			if local == nil || local.Ofport <= 0 {
				return nil, ovsdb.Port{}, fmt.Errorf("bridge %s's own port %s has no OpenFlow port number: OVS could not add it", b.Name, dev)
			}
			return &uplink{bridge: b, port: up[0], local: local}, ovsdb.Port{}, nil
		}
		return &uplink{bridge: b, port: up[0]}, *patch, nil
	}
	return nil, ovsdb.Port{}, fmt.Errorf("%s is no OVS bridge's own port on this node: a packet from outside reaches the node's kernel without crossing OVS first, out of OVS's sight", dev)
}

// arpTableMAC is the MAC the node's ARP table holds for ip on dev, nil
// where it holds none.
func arpTableMAC(ip netip.Addr, dev string) net.HardwareAddr {
	f, err := os.Open("/proc/net/arp")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	return neighborMAC(f, ip, dev)
}

// throughUplink asks OVS for its trace of the probe entering the uplink
// bridge from its uplink, and says whether the bridge sends it into the
// integration bridge (through the patch port whose peer is in): only then
// does the probe go on from in.
func (s *session) throughUplink(ctx context.Context, up *uplink, in *ovsdb.Port, pkt []byte) error {
	t, err := s.traceFromUplink(ctx, up, pkt)
	if err != nil {
		return err
	}
	patch := ""
	for _, p := range up.bridge.Ports {
		if p.Type == "patch" && p.Options["peer"] == in.Name {
			patch = strconv.Itoa(p.Ofport)
		}
	}
	for i, h := range t.Hops {
		if slices.Contains(h.Outputs(), patch) {
			up.hops = t.Hops[:i+1]
			if a := rewrite(up.hops); a != "" {
				return fmt.Errorf("%s's flows change the probe before it enters %s (%q): the helper injects it at the patch port as it arrived, so it would trace another packet than the outside's; it is not injected",
					up.bridge.Name, s.br.Name, a)
			}
			return nil
		}
	}
	last := "no flow"
	if n := len(t.Hops); n > 0 {
		last = fmt.Sprintf("table %d flow %q (priority %d)", t.Hops[n-1].Table, t.Hops[n-1].Match, t.Hops[n-1].Priority)
	}
	return fmt.Errorf("OVS's trace of the probe on %s, from its uplink %s, does not send it into %s (datapath actions %q, last %s): the packet goes to the node's own kernel or out again, not into the pipeline this helper watches, so it is not injected",
		up.bridge.Name, up.port.Name, s.br.Name, t.DatapathActions, last)
}

// traceFromUplink asks OVS for its trace of the probe entering the uplink
// bridge from its uplink.
func (s *session) traceFromUplink(ctx context.Context, up *uplink, pkt []byte) (ofproto.Trace, error) {
	f, err := probe.TraceFlow(pkt)
	if err != nil {
		return ofproto.Trace{}, err
	}
	t, err := s.ovs.Trace(ctx, up.bridge.Name, fmt.Sprintf("in_port=%d,", up.port.Ofport)+f, nil)
	if err != nil {
		return t, fmt.Errorf("ask OVS for its trace of the probe on %s: %w", up.bridge.Name, err)
	}
	return t, nil
}

// rewrite is the first of the uplink bridge's actions on the probe that
// changes the packet that crosses the patch port (its headers or its
// mark), "" where none does. Registers, metadata and conntrack state are
// left behind at the patch port, so loading them and a ct() without nat
// change nothing the integration bridge sees.
func rewrite(hops []ofproto.Hop) string {
	for _, h := range hops {
		for _, a := range h.Actions {
			if rewrites(a) {
				return a
			}
		}
	}
	return ""
}

func rewrites(a string) bool {
	for _, p := range []string{"mod_", "strip_vlan", "push_", "pop_", "dec_ttl", "set_mpls", "dec_mpls_ttl", "encap(", "decap(", "set_tunnel"} {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	switch {
	case strings.HasPrefix(a, "ct("):
		return strings.Contains(a, "nat")
	case strings.HasPrefix(a, "set_field:"), strings.HasPrefix(a, "load:"), strings.HasPrefix(a, "move:"):
		_, dst, ok := strings.Cut(a, "->")
		return !ok || !leftAtPatch(dst)
	}
	return false
}

// leftAtPatch says whether a field an action writes stays in the uplink
// bridge: registers and metadata, which a patch port clears.
func leftAtPatch(field string) bool {
	f := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(field, "NXM_NX_"), "OXM_OF_"))
	for _, p := range []string{"reg", "xreg", "xxreg", "metadata"} {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	return false
}

// entry is the uplink bridge's hop that sends the probe into the
// integration bridge, as OVS's trace predicts it: reported first, and
// inferred.
func (up *uplink) entry(in *ovsdb.Port) (report.Observation, *report.Hop) {
	o := report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded, Inferred: true,
		ComponentInfo: fmt.Sprintf("%s, from its uplink %s into %s", up.bridge.Name, up.port.Name, in.Name)}
	return o, otherBridgeHop(up.hops)
}

// otherBridgeHop is the report of the last of hops (OVS's trace of another
// bridge), nil for none.
func otherBridgeHop(hops []ofproto.Hop) *report.Hop {
	if len(hops) == 0 {
		return nil
	}
	h := hops[len(hops)-1]
	return &report.Hop{Table: h.Table, Flow: h.Match, Priority: h.Priority, Cookie: fmt.Sprintf("%#x", h.Cookie), Actions: h.Actions, NoMatch: h.NoMatch}
}
