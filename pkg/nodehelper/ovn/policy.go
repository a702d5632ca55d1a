package ovn

import (
	"strconv"
	"strings"
)

// The external_ids OVN-Kubernetes writes on the northbound rows it owns:
// the owner's kind and name, and per kind the keys that tell its rows
// apart (for an ACL: the direction, the rule's index).
const (
	keyOwnerType = "k8s.ovn.org/owner-type"
	keyName      = "k8s.ovn.org/name"
	keyDirection = "direction"
	keyGressIdx  = "gress-index"
	keyRuleIdx   = "rule-index"
	keyType      = "type"
	keyLBKind    = "k8s.ovn.org/kind"
	keyLBOwner   = "k8s.ovn.org/owner"
)

// anpFirstPriority is the ACL priority of an AdminNetworkPolicy of
// priority 0; OVN-Kubernetes gives each ANP priority 100 ACL priorities,
// one a rule, downwards (an ANP of priority P's rule i is
// 30000-100*P-i).
const anpFirstPriority, anpRulesPerPriority = 30000, 100

// aclPolicy is what an ACL's external_ids say of the Kubernetes policy
// behind it.
type aclPolicy struct {
	// object is the owner in a reader's words.
	object string
	// ref and rule are the observation's networkPolicy and
	// networkPolicyRule.
	ref, rule string
}

// policyOf reads the policy behind an ACL from the external_ids
// OVN-Kubernetes writes on it. An owner it does not know is named by its
// kind and name, and names no policy.
func policyOf(a ACL) aclPolicy {
	ids := a.ExternalIDs
	kind, name := ids[keyOwnerType], ids[keyName]
	if kind == "" || name == "" {
		return aclPolicy{}
	}
	dir := strings.ToLower(ids[keyDirection])
	gress := func() string {
		if dir == "" || ids[keyGressIdx] == "" {
			return ""
		}
		return dir + " rule " + ids[keyGressIdx]
	}
	switch kind {
	case "NetworkPolicy":
		ns, pol, ok := strings.Cut(name, ":")
		if !ok {
			break
		}
		ref := ns + "/" + pol
		return aclPolicy{object: "NetworkPolicy " + ref, ref: ref, rule: gress()}
	case "NetpolNamespace":
		// Every pod a NetworkPolicy isolates sits in its namespace's
		// default-deny port group for that direction; the ACL belongs to
		// no one policy (the plugin finds those that isolate the pod).
		what := "the default deny"
		if dir != "" {
			what = "the " + dir + " default deny"
		}
		if t := ids[keyType]; t != "" && t != "defaultDeny" {
			what += " (" + t + ")"
		}
		return aclPolicy{object: what + " of namespace " + name + "'s NetworkPolicies"}
	case "AdminNetworkPolicy":
		rule := gress()
		if p, ok := anpPriority(a.Priority); ok && rule != "" {
			rule += ", priority " + strconv.Itoa(p)
		}
		return aclPolicy{object: "AdminNetworkPolicy " + name, ref: "AdminNetworkPolicy:" + name, rule: rule}
	case "BaselineAdminNetworkPolicy":
		return aclPolicy{object: "BaselineAdminNetworkPolicy " + name, ref: "BaselineAdminNetworkPolicy:" + name, rule: gress()}
	case "EgressFirewall":
		// One EgressFirewall a namespace, named "default"; name is the
		// namespace.
		rule := ""
		if ids[keyRuleIdx] != "" {
			rule = "rule " + ids[keyRuleIdx]
		}
		return aclPolicy{object: "EgressFirewall " + name + "/default", ref: "EgressFirewall:" + name + "/default", rule: rule}
	}
	return aclPolicy{object: kind + " " + name}
}

// anpPriority is the priority of the AdminNetworkPolicy whose rule has ACL
// priority p.
func anpPriority(p int) (int, bool) {
	d := anpFirstPriority - p
	if d < 0 || d >= anpRulesPerPriority*anpRulesPerPriority {
		return 0, false
	}
	return d / anpRulesPerPriority, true
}
