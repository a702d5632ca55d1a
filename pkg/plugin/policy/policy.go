// Package policy names the Kubernetes NetworkPolicies behind a drop. OVS
// says which table and flow dropped the probe; which policy that flow came
// from is known only to the agent that wrote it. Kubernetes NetworkPolicies
// only allow, so a drop in a policy table means the pod is isolated in that
// direction and no rule of the policies isolating it allows the probe:
// those policies are the answer, and evaluating them against the probe
// says so without any agent.
package policy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Direction is the side of the target pod a policy guards.
type Direction string

// Directions.
const (
	Ingress Direction = "Ingress"
	Egress  Direction = "Egress"
)

// Endpoint is one end of the probe as policies see it.
type Endpoint struct {
	// Pod is nil when the end is not a pod (an IP outside the cluster).
	Pod             *corev1.Pod
	NamespaceLabels map[string]string
	IP              netip.Addr
}

// Probe is the packet: its protocol ("TCP", "UDP", "SCTP"; "" for ICMP,
// which only rules without ports match) and destination port.
type Probe struct {
	Protocol corev1.Protocol
	Port     int32
}

// Explanation names the policies that drop the probe.
type Explanation struct {
	// Policies are "NAMESPACE/NAME" of every policy isolating the target.
	Policies []string
	// Rule says why none of their rules allows the probe.
	Rule string
}

// Explain evaluates policies (those of the target pod's namespace) for a
// probe from src to dst dropped in direction dir. ok is false when the
// policies do not explain the drop: the target is not isolated, or one of
// its rules allows the probe, so something else (another kind of policy,
// a bug) dropped it.
func Explain(policies []networkingv1.NetworkPolicy, dir Direction, src, dst Endpoint, p Probe) (Explanation, bool) {
	target, peer := dst, src
	if dir == Egress {
		target, peer = src, dst
	}
	if target.Pod == nil {
		return Explanation{}, false
	}
	var isolating, misses []string
	for i := range policies {
		np := &policies[i]
		if np.Namespace != target.Pod.Namespace || !applies(np, dir) || !selects(np.Spec.PodSelector, target.Pod.Labels) {
			continue
		}
		if allows(np, dir, target, peer, p) {
			return Explanation{}, false
		}
		isolating = append(isolating, np.Namespace+"/"+np.Name)
		misses = append(misses, missed(np, dir, target, peer, p)...)
	}
	if len(isolating) == 0 {
		return Explanation{}, false
	}
	sort.Strings(isolating)
	sort.Strings(misses)
	what := "ICMP"
	if p.Protocol != "" {
		what = fmt.Sprintf("%s %d", p.Protocol, p.Port)
	}
	from, word := describe(peer), "from"
	if dir == Egress {
		word = "to"
	}
	rule := fmt.Sprintf("%s default deny: no %s rule allows %s %s %s",
		strings.ToLower(string(dir)), strings.ToLower(string(dir)), what, word, from)
	if len(misses) > 0 {
		rule += " (" + strings.Join(misses, "; ") + ")"
	}
	return Explanation{Policies: isolating, Rule: rule}, true
}

// missed says, for each rule of np in direction dir, what it allows that
// the probe is not: the ports, the peers, or both ("NAME rule N allows
// only ..."), so that a near miss (another port, another namespace, an
// address in an except) reads as one.
func missed(np *networkingv1.NetworkPolicy, dir Direction, target, peer Endpoint, p Probe) []string {
	type rule struct {
		peers []networkingv1.NetworkPolicyPeer
		ports []networkingv1.NetworkPolicyPort
		// servedBy is the pod whose named ports the rule's ports name.
		servedBy *corev1.Pod
	}
	var rules []rule
	word := "from"
	if dir == Ingress {
		for _, r := range np.Spec.Ingress {
			rules = append(rules, rule{r.From, r.Ports, target.Pod})
		}
	} else {
		word = "to"
		for _, r := range np.Spec.Egress {
			rules = append(rules, rule{r.To, r.Ports, peer.Pod})
		}
	}
	var out []string
	for i, r := range rules {
		var why []string
		if !portsMatch(r.ports, r.servedBy, p) {
			why = append(why, describePorts(r.ports))
		}
		if !peersMatch(np, r.peers, peer) {
			why = append(why, word+" "+describePeers(np, r.peers))
		}
		if len(why) > 0 {
			out = append(out, fmt.Sprintf("%s rule %d allows only %s", np.Name, i+1, strings.Join(why, " ")))
		}
	}
	return out
}

// describePorts names a rule's ports as the policy writes them.
func describePorts(ports []networkingv1.NetworkPolicyPort) string {
	var out []string
	for _, pp := range ports {
		proto := corev1.ProtocolTCP
		if pp.Protocol != nil {
			proto = *pp.Protocol
		}
		s := string(proto)
		if pp.Port != nil {
			s += " " + pp.Port.String()
			if pp.EndPort != nil {
				s += fmt.Sprintf("-%d", *pp.EndPort)
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// describePeers names a rule's peers as the policy writes them.
func describePeers(np *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer) string {
	var out []string
	for _, pr := range peers {
		switch {
		case pr.IPBlock != nil:
			s := pr.IPBlock.CIDR
			if len(pr.IPBlock.Except) > 0 {
				s += " except " + strings.Join(pr.IPBlock.Except, ", ")
			}
			out = append(out, s)
		case pr.NamespaceSelector != nil && pr.PodSelector != nil:
			out = append(out, fmt.Sprintf("pods %s in namespaces %s", selector(*pr.PodSelector), selector(*pr.NamespaceSelector)))
		case pr.NamespaceSelector != nil:
			out = append(out, "namespaces "+selector(*pr.NamespaceSelector))
		default:
			out = append(out, fmt.Sprintf("pods %s in %s", selector(*pr.PodSelector), np.Namespace))
		}
	}
	return strings.Join(out, ", ")
}

// selector is a label selector as kubectl prints one ("<all>" for {}).
func selector(sel metav1.LabelSelector) string {
	s := metav1.FormatLabelSelector(&sel)
	if s == "<none>" {
		return "<all>"
	}
	return s
}

func describe(e Endpoint) string {
	if e.Pod != nil {
		return e.Pod.Namespace + "/" + e.Pod.Name
	}
	return e.IP.String()
}

// applies reports whether np guards direction dir. Without policyTypes,
// Ingress always applies and Egress only if egress rules exist.
func applies(np *networkingv1.NetworkPolicy, dir Direction) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return dir == Ingress || len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		if string(t) == string(dir) {
			return true
		}
	}
	return false
}

func selects(sel metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(&sel)
	return err == nil && s.Matches(labels.Set(l))
}

func allows(np *networkingv1.NetworkPolicy, dir Direction, target, peer Endpoint, p Probe) bool {
	if dir == Ingress {
		for _, r := range np.Spec.Ingress {
			if peersMatch(np, r.From, peer) && portsMatch(r.Ports, target.Pod, p) {
				return true
			}
		}
		return false
	}
	for _, r := range np.Spec.Egress {
		if peersMatch(np, r.To, peer) && portsMatch(r.Ports, peer.Pod, p) {
			return true
		}
	}
	return false
}

func peersMatch(np *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer, e Endpoint) bool {
	if len(peers) == 0 {
		return true
	}
	for _, pr := range peers {
		if pr.IPBlock != nil {
			if ipBlockMatch(pr.IPBlock, e.IP) {
				return true
			}
			continue
		}
		if e.Pod == nil {
			continue
		}
		nsOK := e.Pod.Namespace == np.Namespace
		if pr.NamespaceSelector != nil {
			nsOK = selects(*pr.NamespaceSelector, e.NamespaceLabels)
		}
		podOK := pr.PodSelector == nil || selects(*pr.PodSelector, e.Pod.Labels)
		if nsOK && podOK {
			return true
		}
	}
	return false
}

func ipBlockMatch(b *networkingv1.IPBlock, ip netip.Addr) bool {
	pfx, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !ip.IsValid() || !pfx.Contains(ip) {
		return false
	}
	for _, ex := range b.Except {
		if e, err := netip.ParsePrefix(ex); err == nil && e.Contains(ip) {
			return false
		}
	}
	return true
}

// portsMatch checks a rule's ports against the probe; a named port is
// looked up among the containers of pod (the side that serves it).
func portsMatch(ports []networkingv1.NetworkPolicyPort, pod *corev1.Pod, p Probe) bool {
	if len(ports) == 0 {
		return true
	}
	if p.Protocol == "" { // ICMP: a rule with ports never matches it
		return false
	}
	for _, pp := range ports {
		proto := corev1.ProtocolTCP
		if pp.Protocol != nil {
			proto = *pp.Protocol
		}
		if proto != p.Protocol {
			continue
		}
		if pp.Port == nil {
			return true
		}
		port := pp.Port.IntVal
		if pp.Port.StrVal != "" {
			port = namedPort(pod, pp.Port.StrVal, proto)
		}
		end := port
		if pp.EndPort != nil {
			end = *pp.EndPort
		}
		if port != 0 && p.Port >= port && p.Port <= end {
			return true
		}
	}
	return false
}

func namedPort(pod *corev1.Pod, name string, proto corev1.Protocol) int32 {
	if pod == nil {
		return 0
	}
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			cpProto := cp.Protocol
			if cpProto == "" {
				cpProto = corev1.ProtocolTCP
			}
			if cp.Name == name && cpProto == proto {
				return cp.ContainerPort
			}
		}
	}
	return 0
}
