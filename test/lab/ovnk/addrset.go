package ovnk

import (
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// peerAddressSet is the PodSelector address set of a policy peer, shared by
// every rule with the same selectors: the addresses of the pods they select,
// named by the hash of "CONTROLLER:PodSelector:KEY:v4" where KEY is
// getPodSelectorKey's (namespace or namespace selector, then pod selector).
func peerAddressSet(c Cluster, policyNS string, peer networkingv1.NetworkPolicyPeer) AddressSet {
	podSel := peer.PodSelector
	if podSel == nil {
		podSel = &metav1.LabelSelector{} // nil selects all pods of the selected namespaces
	}
	nsKey := policyNS
	if peer.NamespaceSelector != nil {
		nsKey = shortLabelSelectorString(peer.NamespaceSelector)
	}
	key := nsKey + "_" + shortLabelSelectorString(podSel)
	if peer.NamespaceSelector != nil && peer.PodSelector == nil {
		key += "_LNM" // legacyNetpolMode: useNamespaceAddrSet(peer)
	}
	ids := newIDs(ownerPodSelector, keyName, key, "ip-family", "v4")
	var addrs []string
	for _, p := range selectPods(c, policyNS, podSel, peer.NamespaceSelector) {
		if p.IP.IsValid() {
			addrs = append(addrs, p.IP.String())
		}
	}
	sort.Strings(addrs)
	return AddressSet{Name: ids.hashName(), Addresses: addrs, ExternalIDs: ids.externalIDs()}
}

// shortLabelSelectorString is OVN-Kubernetes' stable selector string:
// LS{ML:{k: v,...},ME:{LSR{Key:...,Operator:...,Values:[...],},...},}.
func shortLabelSelectorString(sel *metav1.LabelSelector) string {
	if sel == nil {
		return "nil"
	}
	s := "LS{"
	if len(sel.MatchLabels) > 0 {
		s += "ML:{"
		for _, k := range sortedKeys(sel.MatchLabels) {
			s += fmt.Sprintf("%v: %v,", k, sel.MatchLabels[k])
		}
		s += "},"
	}
	if len(sel.MatchExpressions) > 0 {
		var mes []string
		for _, e := range sel.MatchExpressions {
			vals := append([]string(nil), e.Values...)
			sort.Strings(vals)
			mes = append(mes, fmt.Sprintf("LSR{Key:%v,Operator:%v,Values:%v,}", e.Key, e.Operator, vals))
		}
		sort.Strings(mes)
		s += "ME:{" + strings.Join(mes, ",") + "},"
	}
	return s + "}"
}
