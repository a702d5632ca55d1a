package explain

import (
	"context"
	"errors"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Where OVN-Kubernetes records only a rule's index, the plugin reads the
// policy and names the rule, if that rule still denies.
func TestNameRuleByIndex(t *testing.T) {
	objects := map[string]string{
		anpPath + "deny-b": `{"spec":{"priority":7,"ingress":[{"name":"allow-c","action":"Allow"},{"name":"deny-from-a","action":"Deny"}],
			"egress":[{"name":"pass-all","action":"Pass"}]}}`,
		banpPath + "default": `{"spec":{"ingress":[{"action":"Deny"}]}}`,
		"/apis/k8s.ovn.org/v1/namespaces/demo/egressfirewalls/default": `{"spec":{"egress":[{"type":"Allow","to":{"dnsName":"example.com"}},{"type":"Deny","to":{"cidrSelector":"10.89.0.1/32"}}]}}`,
	}
	e := &Explainer{get: func(_ context.Context, path string) ([]byte, error) {
		if b, ok := objects[path]; ok {
			return []byte(b), nil
		}
		return nil, errors.New("not found")
	}}
	drop := func(policy, rule string) report.Observation {
		return report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped, NetworkPolicy: policy, NetworkPolicyRule: rule}
	}
	for _, c := range []struct{ policy, rule, want string }{
		{"AdminNetworkPolicy:deny-b", "ingress rule 1, priority 7", "deny-from-a (ingress rule 1, priority 7)"},
		// The rule at that index does not deny (the policy changed since):
		// left as the helper said.
		{"AdminNetworkPolicy:deny-b", "ingress rule 0, priority 7", "ingress rule 0, priority 7"},
		{"AdminNetworkPolicy:deny-b", "egress rule 0, priority 7", "egress rule 0, priority 7"},
		{"AdminNetworkPolicy:deny-b", "ingress rule 5, priority 7", "ingress rule 5, priority 7"},
		{"AdminNetworkPolicy:gone", "ingress rule 0, priority 7", "ingress rule 0, priority 7"},
		{"BaselineAdminNetworkPolicy:default", "ingress rule 0", "Deny (ingress rule 0)"},
		{"EgressFirewall:demo/default", "rule 1", "Deny to 10.89.0.1/32 (rule 1)"},
		{"EgressFirewall:demo/default", "rule 0", "rule 0"},
		// Antrea names its rules itself.
		{"AntreaClusterNetworkPolicy:acnp", "rule 1", "rule 1"},
		{"AdminNetworkPolicy:deny-b", "deny-from-a", "deny-from-a"},
	} {
		got := e.ExplainDrop(context.Background(), nil, drop(c.policy, c.rule))
		if got.NetworkPolicyRule != c.want || got.NetworkPolicy != c.policy {
			t.Errorf("%s %q: rule %q, want %q", c.policy, c.rule, got.NetworkPolicyRule, c.want)
		}
	}
	// Without raw requests nothing is read.
	if got := (&Explainer{}).ExplainDrop(context.Background(), nil, drop("AdminNetworkPolicy:deny-b", "ingress rule 1, priority 7")); got.NetworkPolicyRule != "ingress rule 1, priority 7" {
		t.Errorf("no client: %+v", got)
	}
}
