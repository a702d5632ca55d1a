package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// getObject reads one object of the API as JSON, by its path under /apis.
type getObject func(ctx context.Context, path string) ([]byte, error)

// indexRuleRE is a rule as the helper names it where the dataplane
// records the rule's place, not its name: OVN-Kubernetes keeps an
// AdminNetworkPolicy's rule index ("ingress rule 0, priority 7") and an
// EgressFirewall's ("rule 2") on the ACL.
var indexRuleRE = regexp.MustCompile(`^(?:(ingress|egress) )?rule (\d+)(, priority \d+)?$`)

// The API paths of the policies whose rules the helper names by index.
const (
	anpPath  = "/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies/"
	banpPath = "/apis/policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies/"
	efPath   = "/apis/k8s.ovn.org/v1/namespaces/%s/egressfirewalls/%s"
)

// nameRule puts the rule's own words next to a rule the helper could only
// name by its index: an AdminNetworkPolicy's or BaselineAdminNetworkPolicy's
// rule name and action, an EgressFirewall rule's action and peer. The
// policy is read as it is now; where it no longer has that rule, or the
// rule's action is not one that drops, o is left as it is.
func (e *Explainer) nameRule(ctx context.Context, o report.Observation) report.Observation {
	m := indexRuleRE.FindStringSubmatch(o.NetworkPolicyRule)
	if m == nil || e.get == nil {
		return o
	}
	kind, name, _ := strings.Cut(o.NetworkPolicy, ":")
	idx, err := strconv.Atoi(m[2])
	if err != nil {
		return o
	}
	var path string
	switch kind {
	case "AdminNetworkPolicy":
		path = anpPath + name
	case "BaselineAdminNetworkPolicy":
		path = banpPath + name
	case "EgressFirewall":
		ns, ef, ok := strings.Cut(name, "/")
		if !ok || m[1] != "" {
			return o
		}
		path = fmt.Sprintf(efPath, ns, ef)
	default:
		return o
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	b, err := e.get(ctx, path)
	if err != nil {
		return o
	}
	var said string
	if kind == "EgressFirewall" {
		said = egressFirewallRule(b, idx)
	} else {
		said = adminRule(b, m[1], idx)
	}
	if said != "" {
		o.NetworkPolicyRule = said + " (" + o.NetworkPolicyRule + ")"
	}
	return o
}

// adminRule is the name of rule idx in direction dir of an
// AdminNetworkPolicy or BaselineAdminNetworkPolicy (JSON b), where that
// rule denies; "" otherwise.
func adminRule(b []byte, dir string, idx int) string {
	type rule struct {
		Name   string `json:"name"`
		Action string `json:"action"`
	}
	var p struct {
		Spec struct {
			Ingress []rule `json:"ingress"`
			Egress  []rule `json:"egress"`
		} `json:"spec"`
	}
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	rules := p.Spec.Ingress
	if dir == "egress" {
		rules = p.Spec.Egress
	}
	if idx >= len(rules) || rules[idx].Action != "Deny" {
		return ""
	}
	if rules[idx].Name == "" {
		return "Deny"
	}
	return rules[idx].Name
}

// egressFirewallRule says what rule idx of an EgressFirewall (JSON b) does,
// where it denies: "Deny to 10.0.0.0/8", "Deny to example.com".
func egressFirewallRule(b []byte, idx int) string {
	var ef struct {
		Spec struct {
			Egress []struct {
				Type string `json:"type"`
				To   struct {
					CIDRSelector string `json:"cidrSelector"`
					DNSName      string `json:"dnsName"`
				} `json:"to"`
			} `json:"egress"`
		} `json:"spec"`
	}
	if json.Unmarshal(b, &ef) != nil || idx >= len(ef.Spec.Egress) || ef.Spec.Egress[idx].Type != "Deny" {
		return ""
	}
	r := ef.Spec.Egress[idx]
	to := r.To.CIDRSelector
	if to == "" {
		to = r.To.DNSName
	}
	return "Deny to " + to
}
