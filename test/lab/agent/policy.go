package agent

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ActionAnnotation on a NetworkPolicy set to "reject" makes the lab reject
// (TCP RST, ICMP unreachable) what the policy isolates instead of dropping
// it, as an Antrea-native policy with action Reject does. A pod isolated by
// several policies is rejected when any of them says reject.
const ActionAnnotation = "lab.traceflow.dev/action"

// RouteAnnotation on a pod set to "gateway" makes every other node send
// traffic for that pod out of its gateway (antrea-gw0) and through the
// host's routing over the underlay, instead of into the tunnel, as a
// noEncap or hybrid Antrea cluster does.
const RouteAnnotation = "lab.traceflow.dev/route"

// DropRepliesAnnotation on a pod set to "PROTO/PORT" (tcp/80) makes its
// node drop what the pod answers from that port, and nothing else: a path
// open one way and broken on the way back, a fault for round trips to
// find (issue 26).
const DropRepliesAnnotation = "lab.traceflow.dev/drop-replies"

// ReplyDrop is a local pod's answers from one port, dropped.
type ReplyDrop struct {
	IP       netip.Addr
	Protocol string
	Port     int
}

// DroppedReplies returns the replies the local pods' drop-replies
// annotations drop; an annotation that does not parse drops nothing.
func DroppedReplies(pods []*corev1.Pod, local map[netip.Addr]bool) []ReplyDrop {
	var out []ReplyDrop
	for _, p := range pods {
		ip, ok := PodIP(p)
		v := p.Annotations[DropRepliesAnnotation]
		if !ok || !local[ip] || v == "" {
			continue
		}
		proto, port, _ := strings.Cut(v, "/")
		n, err := strconv.Atoi(port)
		if (proto != "tcp" && proto != "udp") || err != nil || n < 1 || n > 65535 {
			continue
		}
		out = append(out, ReplyDrop{IP: ip, Protocol: proto, Port: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out
}

// GatewayRouted returns the IPs of pods outside local that carry the route
// annotation.
func GatewayRouted(pods []*corev1.Pod, local map[netip.Addr]bool) []netip.Addr {
	set := map[netip.Addr]bool{}
	for _, p := range pods {
		if ip, ok := PodIP(p); ok && !p.Spec.HostNetwork && !local[ip] && p.Annotations[RouteAnnotation] == "gateway" {
			set[ip] = true
		}
	}
	return sortedAddrs(set)
}

// CompilePolicies turns NetworkPolicies into rules for the pods whose IPs are
// in local. The subset: pod and namespace selectors, ipBlock CIDRs with
// their excepts, numeric TCP/UDP ports, ingress and egress, default deny.
func CompilePolicies(nps []*networkingv1.NetworkPolicy, pods []*corev1.Pod, nss []*corev1.Namespace, local map[netip.Addr]bool) Policies {
	var out Policies
	nsLabels := map[string]labels.Set{}
	for _, ns := range nss {
		nsLabels[ns.Name] = ns.Labels
	}
	ingIso, egIso := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	ingRej, egRej := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for _, np := range nps {
		applied := selectPods(pods, &np.Spec.PodSelector, func(ns string) bool { return ns == np.Namespace })
		var mine []netip.Addr
		for _, a := range applied {
			if local[a] {
				mine = append(mine, a)
			}
		}
		if len(mine) == 0 {
			continue
		}
		ingress, egress := len(np.Spec.PolicyTypes) == 0, len(np.Spec.PolicyTypes) == 0 && len(np.Spec.Egress) > 0
		for _, t := range np.Spec.PolicyTypes {
			ingress = ingress || t == networkingv1.PolicyTypeIngress
			egress = egress || t == networkingv1.PolicyTypeEgress
		}
		name := np.Namespace + "/" + np.Name
		reject := np.Annotations[ActionAnnotation] == "reject"
		if ingress {
			for _, a := range mine {
				ingIso[a] = true
				if reject {
					ingRej[a] = true
				}
			}
			for _, r := range np.Spec.Ingress {
				out.Rules = append(out.Rules, Rule{Policy: name, Ingress: true, Local: mine,
					Peers: peers(r.From, np.Namespace, pods, nsLabels), Ports: ports(r.Ports)})
			}
		}
		if egress {
			for _, a := range mine {
				egIso[a] = true
				if reject {
					egRej[a] = true
				}
			}
			for _, r := range np.Spec.Egress {
				out.Rules = append(out.Rules, Rule{Policy: name, Local: mine,
					Peers: peers(r.To, np.Namespace, pods, nsLabels), Ports: ports(r.Ports)})
			}
		}
	}
	out.IngressIsolated, out.EgressIsolated = sortedAddrs(ingIso), sortedAddrs(egIso)
	out.IngressReject, out.EgressReject = sortedAddrs(ingRej), sortedAddrs(egRej)
	return out
}

func sortedAddrs(m map[netip.Addr]bool) []netip.Addr {
	var out []netip.Addr
	for a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

func selector(s *metav1.LabelSelector) labels.Selector {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return labels.Nothing()
	}
	return sel
}

// PodIP returns a running pod's IPv4 address.
func PodIP(p *corev1.Pod) (netip.Addr, bool) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(p.Status.PodIP)
	return a, err == nil && a.Is4()
}

func selectPods(pods []*corev1.Pod, s *metav1.LabelSelector, nsOK func(string) bool) []netip.Addr {
	sel := selector(s)
	var out []netip.Addr
	for _, p := range pods {
		if ip, ok := PodIP(p); ok && !p.Spec.HostNetwork && nsOK(p.Namespace) && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, ip)
		}
	}
	return out
}

// peers returns nil (anywhere) for an empty peer list, else the selected
// addresses; a list that selects nothing gives an empty, non-nil slice.
func peers(ps []networkingv1.NetworkPolicyPeer, policyNS string, pods []*corev1.Pod, nsLabels map[string]labels.Set) []netip.Prefix {
	if len(ps) == 0 {
		return nil
	}
	out := []netip.Prefix{}
	for _, p := range ps {
		if p.IPBlock != nil {
			if pr, err := netip.ParsePrefix(p.IPBlock.CIDR); err == nil && pr.Addr().Is4() {
				var except []netip.Prefix
				for _, e := range p.IPBlock.Except {
					if ep, err := netip.ParsePrefix(e); err == nil && ep.Addr().Is4() {
						except = append(except, ep.Masked())
					}
				}
				out = append(out, subtract(pr.Masked(), except)...)
			}
			continue
		}
		nsOK := func(ns string) bool { return ns == policyNS }
		if p.NamespaceSelector != nil {
			nsSel := selector(p.NamespaceSelector)
			nsOK = func(ns string) bool { return nsSel.Matches(nsLabels[ns]) }
		}
		podSel := p.PodSelector
		if podSel == nil {
			podSel = &metav1.LabelSelector{}
		}
		for _, a := range selectPods(pods, podSel, nsOK) {
			out = append(out, netip.PrefixFrom(a, 32))
		}
	}
	return out
}

// subtract is p without the addresses of except, as the fewest prefixes
// that cover the rest: the flows match prefixes, and an ipBlock's except
// carves holes in its CIDR. A half that no except overlaps is kept whole, a
// half that one covers is dropped, and one that an except only partly
// overlaps is split again.
func subtract(p netip.Prefix, except []netip.Prefix) []netip.Prefix {
	overlaps := false
	for _, e := range except {
		if e.Bits() <= p.Bits() && e.Contains(p.Addr()) {
			return nil // p lies inside an except
		}
		overlaps = overlaps || p.Overlaps(e)
	}
	if !overlaps {
		return []netip.Prefix{p}
	}
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	hiAddr := p.Addr().As4()
	bit := p.Bits()
	hiAddr[bit/8] |= 0x80 >> (bit % 8)
	hi := netip.PrefixFrom(netip.AddrFrom4(hiAddr), p.Bits()+1)
	return append(subtract(lo, except), subtract(hi, except)...)
}

func ports(ps []networkingv1.NetworkPolicyPort) []PortProto {
	if len(ps) == 0 {
		return nil
	}
	out := []PortProto{}
	for _, p := range ps {
		proto := "tcp"
		if p.Protocol != nil {
			proto = strings.ToLower(string(*p.Protocol))
		}
		if proto != "tcp" && proto != "udp" {
			continue
		}
		if p.Port == nil {
			out = append(out, PortProto{Protocol: proto})
		} else if p.Port.IntValue() > 0 { // named ports are outside the subset
			out = append(out, PortProto{Protocol: proto, Port: p.Port.IntValue()})
		}
	}
	return out
}

// CompileServices joins ClusterIP Services with their EndpointSlices. Only
// endpoints inside podRange are kept: the lab routes nothing else.
func CompileServices(svcs []*corev1.Service, slices []*discoveryv1.EndpointSlice, podRange netip.Prefix) []ServicePort {
	bySvc := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range slices {
		bySvc[s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName]] = append(bySvc[s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName]], s)
	}
	var out []ServicePort
	for _, svc := range svcs {
		cip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !cip.Is4() {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			proto := strings.ToLower(string(sp.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			if proto != "tcp" && proto != "udp" {
				continue
			}
			p := ServicePort{Key: svc.Namespace + "/" + svc.Name + ":" + sp.Name + ":" + proto, ClusterIP: cip, Protocol: proto, Port: int(sp.Port)}
			seen := map[Endpoint]bool{}
			for _, sl := range bySvc[svc.Namespace+"/"+svc.Name] {
				if sl.AddressType != discoveryv1.AddressTypeIPv4 {
					continue
				}
				port := 0
				for _, epp := range sl.Ports {
					if epp.Name != nil && *epp.Name == sp.Name && epp.Port != nil {
						port = int(*epp.Port)
					}
				}
				if port == 0 {
					continue
				}
				for _, ep := range sl.Endpoints {
					if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
						continue
					}
					for _, a := range ep.Addresses {
						ip, err := netip.ParseAddr(a)
						e := Endpoint{IP: ip, Port: port}
						if err == nil && podRange.Contains(ip) && !seen[e] {
							seen[e] = true
							p.Endpoints = append(p.Endpoints, e)
						}
					}
				}
			}
			sort.Slice(p.Endpoints, func(i, j int) bool { return p.Endpoints[i].IP.Less(p.Endpoints[j].IP) })
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
