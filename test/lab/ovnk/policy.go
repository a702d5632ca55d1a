package ovnk

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PortGroupState is a port group with its member ports (by LSP name) and
// its ACLs.
type PortGroupState struct {
	Group     PortGroup
	PortNames []string
	ACLs      []ACL
}

// Cluster is what NetworkPolicies are translated against.
type Cluster struct {
	Pods       []Pod                        // pods with addresses
	Namespaces map[string]map[string]string // namespace labels
}

// Gress-rule ACL indices of gress_policy.go: emptyIdx for the peer-selector
// (or any-peer) ACL, ipBlockCombinedIdx for the ipBlock ACL.
const (
	emptyIdx           = -1
	ipBlockCombinedIdx = -2
)

// Policies is OVN-Kubernetes' translation of NetworkPolicies: per policy a
// port group of its selected pods carrying its allow ACLs (1001); per
// namespace with policies a default-deny port group per direction holding the
// pods some policy of that direction selects, with a drop (1000) and an
// ARP/ND allow (1001); peer selectors as shared PodSelector address sets.
func Policies(c Cluster, nps []*networkingv1.NetworkPolicy) ([]PortGroupState, []AddressSet) {
	nps = append([]*networkingv1.NetworkPolicy(nil), nps...)
	sort.Slice(nps, func(i, j int) bool {
		return nps[i].Namespace+"/"+nps[i].Name < nps[j].Namespace+"/"+nps[j].Name
	})
	sets := map[string]AddressSet{}
	type denyPorts struct{ ingress, egress map[string]bool }
	deny := map[string]*denyPorts{}
	var pgs []PortGroupState
	for _, np := range nps {
		selected := selectPods(c, np.Namespace, &np.Spec.PodSelector, nil)
		ports := lspNames(selected)
		ingress, egress := policyTypes(np)
		d := deny[np.Namespace]
		if d == nil {
			d = &denyPorts{ingress: map[string]bool{}, egress: map[string]bool{}}
			deny[np.Namespace] = d
		}
		pgIDs := newIDs(ownerNetworkPolicy, keyName, np.Namespace+":"+np.Name)
		pg := PortGroupState{Group: PortGroup{Name: pgIDs.hashName(), ExternalIDs: pgIDs.externalIDs()}, PortNames: ports}
		if ingress {
			for i, r := range np.Spec.Ingress {
				pg.ACLs = append(pg.ACLs, gressACLs(c, np, networkingv1.PolicyTypeIngress, i, r.From, r.Ports, pg.Group.Name, sets)...)
			}
			for _, p := range ports {
				d.ingress[p] = true
			}
		}
		if egress {
			for i, r := range np.Spec.Egress {
				pg.ACLs = append(pg.ACLs, gressACLs(c, np, networkingv1.PolicyTypeEgress, i, r.To, r.Ports, pg.Group.Name, sets)...)
			}
			for _, p := range ports {
				d.egress[p] = true
			}
		}
		pgs = append(pgs, pg)
	}
	for _, ns := range sortedKeys(deny) {
		pgs = append(pgs, defaultDeny(ns, networkingv1.PolicyTypeIngress, sortedKeys(deny[ns].ingress)),
			defaultDeny(ns, networkingv1.PolicyTypeEgress, sortedKeys(deny[ns].egress)))
	}
	var as []AddressSet
	for _, k := range sortedKeys(sets) {
		as = append(as, sets[k])
	}
	return pgs, as
}

// ClusterPortGroup is clusterPortGroup: every node's management port, which
// puts its ACLs on every node switch. It carries the allow-hairpinning ACLs
// (1001, both directions) so that policies never drop a pod reaching itself
// through a Service, whose source OVN rewrites to the hairpin SNAT IP.
func ClusterPortGroup(nodes []string, hairpinSNATIP string) PortGroupState {
	ids := newIDs(ownerCluster, keyName, clusterPortGroupKey)
	pg := PortGroupState{Group: PortGroup{Name: ids.hashName(), ExternalIDs: ids.externalIDs()}}
	for _, n := range nodes {
		pg.PortNames = append(pg.PortNames, ManagementPort(n))
	}
	sort.Strings(pg.PortNames)
	v4 := strings.Fields(hairpinSNATIP)
	if len(v4) == 0 {
		return pg
	}
	for _, dir := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress} {
		aclIDs := newIDs(ownerNetpolDefault, keyName, "allow-hairpinning", "direction", string(dir))
		pg.ACLs = append(pg.ACLs, buildACL(aclIDs, "", dir, allowPriority, "ip4.src == "+v4[0], "allow-related"))
	}
	return pg
}

func defaultDeny(ns string, dir networkingv1.PolicyType, ports []string) PortGroupState {
	ids := newIDs(ownerNetpolNS, keyName, ns, "direction", string(dir))
	name := ids.hashName()
	lport := lportMatch(dir, name)
	aclName := "NP:" + ns + ":" + string(dir)
	aclIDs := func(t string) dbIDs { return newIDs(ownerNetpolNS, keyName, ns, "direction", string(dir), "type", t) }
	return PortGroupState{
		Group: PortGroup{Name: name, ExternalIDs: ids.externalIDs()}, PortNames: ports,
		ACLs: []ACL{
			buildACL(aclIDs("defaultDeny"), aclName, dir, denyPriority, lport, "drop"),
			buildACL(aclIDs("arpAllow"), aclName, dir, allowPriority, lport+" && (arp || nd)", "allow"),
		},
	}
}

// gressACLs is gressPolicy.buildLocalPodACLs for rule idx of np.
func gressACLs(c Cluster, np *networkingv1.NetworkPolicy, dir networkingv1.PolicyType, idx int,
	peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, pgName string, sets map[string]AddressSet) []ACL {
	l4, ok := l4Matches(ports)
	if !ok {
		return nil // only named ports, which this controller does not resolve: allow nothing
	}
	side := "src"
	if dir == networkingv1.PolicyTypeEgress {
		side = "dst"
	}
	var blocks, asNames []string
	for _, p := range peers {
		switch {
		case p.IPBlock != nil:
			m := fmt.Sprintf("ip4.%s == %s", side, p.IPBlock.CIDR)
			if len(p.IPBlock.Except) > 0 {
				m = fmt.Sprintf("(%s && ip4.%s != {%s})", m, side, strings.Join(p.IPBlock.Except, ", "))
			}
			blocks = append(blocks, m)
		case p.PodSelector != nil || p.NamespaceSelector != nil:
			as := peerAddressSet(c, np.Namespace, p)
			sets[as.Name] = as
			asNames = append(asNames, "$"+as.Name)
		}
	}
	lport := lportMatch(dir, pgName)
	aclName := fmt.Sprintf("NP:%s:%s:%s:%d", np.Namespace, np.Name, dir, idx)
	ids := func(ipBlockIdx int, proto string) dbIDs {
		return newIDs(ownerNetworkPolicy, keyName, np.Namespace+":"+np.Name, "direction", string(dir),
			"gress-index", strconv.Itoa(idx), "port-policy-protocol", proto, "ip-block-index", strconv.Itoa(ipBlockIdx))
	}
	with := func(l3, l4m string) string {
		if l4m == "None" {
			return l3 + " && " + lport
		}
		return l3 + " && " + l4m + " && " + lport
	}
	var acls []ACL
	for _, proto := range sortedKeys(l4) {
		if len(blocks) > 0 {
			l3 := blocks[0]
			if len(blocks) > 1 {
				l3 = "(" + strings.Join(blocks, " || ") + ")"
			}
			acls = append(acls, buildACL(ids(ipBlockCombinedIdx, proto), aclName, dir, allowPriority, with(l3, l4[proto]), "allow-related"))
		}
		if len(peers) == 0 || len(asNames) > 0 {
			l3 := "ip4"
			if len(asNames) > 0 {
				l3 = fmt.Sprintf("ip4.%s == {%s}", side, joinSorted(asNames, ", "))
			}
			acls = append(acls, buildACL(ids(emptyIdx, proto), aclName, dir, allowPriority, with(l3, l4[proto]), "allow-related"))
		}
	}
	return acls
}

// l4Matches is GetL4MatchesFromNetworkPolicyPorts: per protocol ("None" for
// a rule without ports) its match. ok is false when every port was named.
func l4Matches(ports []networkingv1.NetworkPolicyPort) (map[string]string, bool) {
	if len(ports) == 0 {
		return map[string]string{"None": "None"}, true
	}
	type pl struct{ list, ranges []string }
	byProto := map[string]*pl{}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
			continue
		}
		if p.Port != nil && p.Port.IntVal == 0 {
			continue // named port
		}
		name := strings.ToLower(string(proto))
		if byProto[name] == nil {
			byProto[name] = &pl{}
		}
		switch {
		case p.Port == nil:
		case p.EndPort != nil && *p.EndPort != p.Port.IntVal:
			byProto[name].ranges = append(byProto[name].ranges, fmt.Sprintf("%d<=%s.dst<=%d", p.Port.IntVal, name, *p.EndPort))
		default:
			byProto[name].list = append(byProto[name].list, strconv.Itoa(int(p.Port.IntVal)))
		}
	}
	if len(byProto) == 0 {
		return nil, false
	}
	out := map[string]string{}
	for proto, ps := range byProto {
		var all []string
		if len(ps.list) == 1 {
			all = append(all, fmt.Sprintf("%s.dst==%s", proto, ps.list[0]))
		} else if len(ps.list) > 1 {
			all = append(all, fmt.Sprintf("%s.dst=={%s}", proto, strings.Join(ps.list, ",")))
		}
		all = append(all, ps.ranges...)
		switch len(all) {
		case 0:
			out[proto] = proto
		case 1:
			out[proto] = proto + " && " + all[0]
		default:
			out[proto] = proto + " && (" + strings.Join(all, " || ") + ")"
		}
	}
	return out, true
}

func lportMatch(dir networkingv1.PolicyType, pg string) string {
	if dir == networkingv1.PolicyTypeEgress {
		return "inport == @" + pg
	}
	return "outport == @" + pg
}

// buildACL is libovsdbutil.BuildACL: ingress ACLs are to-lport; egress ACLs
// are from-lport applied after load balancing, so they see the endpoint, not
// the VIP (ls_in_acl_after_lb).
func buildACL(ids dbIDs, name string, dir networkingv1.PolicyType, priority int, match, action string) ACL {
	a := ACL{Priority: priority, Direction: "to-lport", Match: match, Action: action, ExternalIDs: ids.externalIDs()}
	if dir == networkingv1.PolicyTypeEgress {
		a.Direction = "from-lport"
		a.Options = map[string]string{"apply-after-lb": "true"}
	}
	if name != "" {
		n := fmt.Sprintf("%.63s", name)
		a.Name = &n
	}
	return a
}

func policyTypes(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		ingress = ingress || t == networkingv1.PolicyTypeIngress
		egress = egress || t == networkingv1.PolicyTypeEgress
	}
	return ingress, egress
}

// selectPods: pods of namespace ns (or, with nsSel, of the namespaces it
// selects) that podSel selects. An invalid selector selects nothing.
func selectPods(c Cluster, ns string, podSel, nsSel *metav1.LabelSelector) []Pod {
	ps, err := metav1.LabelSelectorAsSelector(podSel)
	if err != nil {
		return nil
	}
	nss := labels.Nothing()
	if nsSel != nil {
		if nss, err = metav1.LabelSelectorAsSelector(nsSel); err != nil {
			return nil
		}
	}
	var out []Pod
	for _, p := range c.Pods {
		inNS := p.Namespace == ns && nsSel == nil || nsSel != nil && nss.Matches(labels.Set(c.Namespaces[p.Namespace]))
		if inNS && ps.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

func lspNames(pods []Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, PodPort(p.Namespace, p.Name))
	}
	sort.Strings(out)
	return out
}
