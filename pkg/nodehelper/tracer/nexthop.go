package tracer

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
)

// The probe must carry the destination MAC the source pod itself would
// put on the packet, or the pipeline takes it elsewhere (a routed probe
// with the MAC of a port that is not the pod's gateway goes to that port).
// A pod puts the MAC its ARP for the next hop is answered with: the
// destination's own, for a destination in its on-link subnet; else its
// gateway's. Where the pipeline answers that ARP itself (OVN's logical
// switch answers for its router port's and its pods' addresses), OVS's
// trace of the pod's ARP request shows the answer in the datapath actions;
// that answer is what the pod uses. Where the pipeline passes the ARP on
// (Antrea's and the lab's pipelines send it to the gateway's kernel port),
// the helper falls back to the local pod's or the gateway port's MAC.

// nextHop is the address the source pod ARPs for to reach dst: dst itself
// where one of the pod's recorded subnets holds both, else that subnet's
// first address, where Kubernetes CNIs put a pod's gateway
// (OVN-Kubernetes, Antrea, host-local's default). ok is false where the
// CNI recorded no subnet for the pod's address.
func nextHop(src *ovsdb.Port, srcIP, dst netip.Addr) (netip.Addr, bool) {
	for _, pf := range src.PodPrefixes() {
		pf = pf.Masked()
		if !pf.Contains(srcIP) || !srcIP.Is4() {
			continue
		}
		if pf.Contains(dst) {
			return dst, true
		}
		return pf.Addr().Next(), true
	}
	return netip.Addr{}, false
}

// arpFlow is the source pod's ARP request for target, in ofproto/trace's
// flow syntax.
func arpFlow(inPort int, srcMAC net.HardwareAddr, srcIP, target netip.Addr) string {
	return fmt.Sprintf("in_port=%d,arp,dl_src=%s,dl_dst=ff:ff:ff:ff:ff:ff,arp_op=1,arp_spa=%s,arp_tpa=%s,arp_sha=%s,arp_tha=00:00:00:00:00:00",
		inPort, srcMAC, srcIP, target, srcMAC)
}

// arpShaRE finds the ARP sender address a datapath action sets.
var arpShaRE = regexp.MustCompile(`set\(arp\([^)]*\bsha=([0-9a-fA-F:]{17})`)
var arpOpReplyRE = regexp.MustCompile(`set\(arp\([^)]*\bop=2\b`)

// ARPAnswer returns the MAC with which the pipeline itself answers an ARP
// request, as OVS's trace of the request shows it (the datapath actions
// turn it into a reply, op=2, whose sender address is the answer and which
// is output), or nil where the pipeline passes the request on.
func ARPAnswer(t ofproto.Trace) net.HardwareAddr {
	if !arpOpReplyRE.MatchString(t.DatapathActions) {
		return nil
	}
	if len(ofproto.ParseDatapathActions(t.DatapathActions).Outputs) == 0 {
		return nil
	}
	m := arpShaRE.FindStringSubmatch(t.DatapathActions)
	if m == nil {
		return nil
	}
	mac, err := net.ParseMAC(m[1])
	if err != nil {
		return nil
	}
	return mac
}

// answeredMAC asks OVS's trace of the source pod's ARP for its next hop
// towards dst, and returns the pipeline's answer, or nil (with the reason
// logged) where there is none.
func (s *session) answeredMAC(ctx context.Context, src *ovsdb.Port, srcMAC net.HardwareAddr, srcIP, dst netip.Addr) net.HardwareAddr {
	target, ok := nextHop(src, srcIP, dst)
	if !ok {
		return nil
	}
	return s.arpAnswer(ctx, src, srcMAC, srcIP, target)
}

// arpAnswer is the pipeline's own answer to the source's ARP for target,
// or nil (with the reason logged).
func (s *session) arpAnswer(ctx context.Context, src *ovsdb.Port, srcMAC net.HardwareAddr, srcIP, target netip.Addr) net.HardwareAddr {
	if srcMAC == nil || !target.Is4() {
		return nil
	}
	t, err := s.ovs.Trace(ctx, s.c.Bridge, arpFlow(src.Ofport, srcMAC, srcIP, target), nil)
	if err != nil {
		s.c.Logf("ask OVS for its trace of the source's ARP for %s: %v", target, err)
		return nil
	}
	mac := ARPAnswer(t)
	if mac == nil {
		s.c.Logf("the pipeline does not answer the source's ARP for %s itself (datapath actions %q)", target, t.DatapathActions)
		return nil
	}
	s.c.Logf("the pipeline answers the source's ARP for %s with %s: the probe's destination MAC", target, mac)
	return mac
}

// destinationMAC is the MAC the source would put on its packet to the
// destination, where it can be told; nil leaves it to probeSpec's
// fallbacks. A node's own packet carries what its kernel's ARP table holds
// for its next hop; failing that, what the pipeline answers for it.
func (s *session) destinationMAC(ctx context.Context, src *ovsdb.Port, spec TraceSpec) net.HardwareAddr {
	ip, mac := sourceAddrs(src, spec)
	if !ip.IsValid() || !spec.Destination.IsValid() {
		return nil
	}
	if !spec.SourceNode {
		return s.answeredMAC(ctx, src, mac, ip, spec.Destination)
	}
	if f, err := os.Open("/proc/net/arp"); err == nil {
		n := neighborMAC(f, spec.nextHop, src.Name)
		_ = f.Close()
		if n != nil {
			s.c.Logf("the node's ARP table holds %s for %s on %s: the probe's destination MAC", n, spec.nextHop, src.Name)
			return n
		}
	}
	return s.arpAnswer(ctx, src, mac, ip, spec.nextHop)
}
