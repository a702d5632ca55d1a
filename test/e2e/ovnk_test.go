//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Issue 22: the genuine OVN-Kubernetes. Tests of what only its topology
// and its policy kinds have.
var ovnkOnly = []string{modeOVNK}

// labHostIP is the lab's host on the nodes' network (lab.sh's HOST_IP):
// outside the cluster, and it answers ping.
const labHostIP = "10.89.0.1"

// ovnkPolicyFixture: pods in their own namespace, each the subject of one
// kind of policy OVN-Kubernetes programs as ACLs of its own kind: a (the
// client) and x on node 1; b, p, e and d on node 2.
//   - b: AdminNetworkPolicy ANP (priority 7), rule 0 denies TCP 8080 from a;
//   - p: the same ANP's rule 1 passes TCP 8081 from a to the NetworkPolicies,
//     where only-80 admits TCP 80 only;
//   - e: the BaselineAdminNetworkPolicy denies TCP 8082 from a;
//   - d: a NetworkPolicy with no rule (the namespace's default deny);
//   - x: a NetworkPolicy that allows no egress;
//   - the namespace's EgressFirewall denies the lab's host.
func ovnkPolicyFixture(t testing.TB) (ns, anp string, ips map[string]string) {
	t.Helper()
	requireLab(t)
	ns = namespace(t, "ovnk")
	anp = "e2e-" + ns
	mustKubectl(t, "traceflow", "install")
	peer := fmt.Sprintf(`{pods: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}, podSelector: {matchLabels: {app: client}}}}`, ns)
	subject := func(apps ...string) string {
		return fmt.Sprintf(`{pods: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}, podSelector: {matchExpressions: [{key: app, operator: In, values: [%s]}]}}}`, ns, strings.Join(apps, ", "))
	}
	apply(t, podSpec(ns, "a", labNodes[0].name, map[string]string{"app": "client"})+
		podSpec(ns, "x", labNodes[0].name, map[string]string{"app": "no-egress"})+
		podSpec(ns, "b", labNodes[1].name, map[string]string{"app": "anp-deny"})+
		podSpec(ns, "p", labNodes[1].name, map[string]string{"app": "pass"})+
		podSpec(ns, "e", labNodes[1].name, map[string]string{"app": "banp"})+
		podSpec(ns, "d", labNodes[1].name, map[string]string{"app": "deny-all"})+
		netpol{ns: ns, name: "only-80", app: "pass", ingress: []string{tcpRule("", 80)}}.yaml()+
		denyIngress(ns, "deny-all", "deny-all")+
		denyEgress(ns, "no-egress", "no-egress")+
		fmt.Sprintf(`apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: %[1]s}
spec:
  priority: 7
  subject: %[2]s
  ingress:
  - {name: deny-8080-from-client, action: Deny, from: [%[3]s], ports: [{portNumber: {protocol: TCP, port: 8080}}]}
  - {name: pass-8081-from-client, action: Pass, from: [%[3]s], ports: [{portNumber: {protocol: TCP, port: 8081}}]}
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: BaselineAdminNetworkPolicy
metadata: {name: default}
spec:
  subject: %[4]s
  ingress:
  - {name: deny-8082-from-client, action: Deny, from: [%[3]s], ports: [{portNumber: {protocol: TCP, port: 8082}}]}
---
apiVersion: k8s.ovn.org/v1
kind: EgressFirewall
metadata: {name: default, namespace: %[5]s}
spec:
  egress:
  - {type: Allow, to: {cidrSelector: 10.89.0.11/32}}
  - {type: Deny, to: {cidrSelector: %[6]s/32}}
`, anp, subject("anp-deny", "pass"), peer, subject("banp"), ns, labHostIP))
	t.Cleanup(func() {
		mustKubectl(t, "delete", "adminnetworkpolicies.policy.networking.k8s.io", anp, "--ignore-not-found")
		mustKubectl(t, "delete", "baselineadminnetworkpolicies.policy.networking.k8s.io", "default", "--ignore-not-found")
	})
	ips = map[string]string{}
	for name, p := range waitPods(t, ns, "a", "x", "b", "p", "e", "d") {
		ips[name] = p.Status.PodIP
	}
	return ns, anp, ips
}

// Done-when 3: every kind of policy OVN-Kubernetes programs drops the
// probe where real traffic is dropped, and the trace names the object and
// the rule, on the node and in the stage that dropped it: a pod's ingress
// in the destination switch's egress pipeline (ls_out_acl*) on the
// destination's node; its egress in the source switch's ingress pipeline
// (ls_in_acl*) on the source's node; an EgressFirewall rule, which
// OVN-Kubernetes writes as a to-lport ACL matching the namespace's pods as
// inport, in the source switch's egress pipeline (ls_out_acl*), on the way
// to the router.
func TestOVNKPoliciesNamed(t *testing.T) {
	ns, anp, ips := ovnkPolicyFixture(t)
	for _, tc := range []struct {
		name       string
		src, dst   string // pods; dst "" is the lab's host
		proto      string
		port       int
		node       int    // the node that drops
		stage      string // the drop's stage, a prefix
		policy     string // the observation's networkPolicy
		ruleHas    string // in its networkPolicyRule
		passPolicy string // an earlier hop passes it on (tableHops)
	}{
		{"AdminNetworkPolicy deny", "a", "b", "tcp", 8080, 1, "ls_out_acl", "AdminNetworkPolicy:" + anp, "deny-8080-from-client (ingress rule 0, priority 7)", ""},
		{"AdminNetworkPolicy pass, then a NetworkPolicy", "a", "p", "tcp", 8081, 1, "ls_out_acl", ns + "/only-80", "", "AdminNetworkPolicy:" + anp},
		{"BaselineAdminNetworkPolicy deny", "a", "e", "tcp", 8082, 1, "ls_out_acl", "BaselineAdminNetworkPolicy:default", "deny-8082-from-client (ingress rule 0)", ""},
		{"namespace default deny", "a", "d", "tcp", 80, 1, "ls_out_acl", ns + "/deny-all", "", ""},
		{"NetworkPolicy egress", "x", "b", "tcp", 80, 0, "ls_in_acl", ns + "/no-egress", "", ""},
		{"EgressFirewall deny", "a", "", "icmp", 0, 0, "ls_out_acl", "EgressFirewall:" + ns + "/default", "Deny to " + labHostIP + "/32 (rule 1)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dstIP, dstArg := labHostIP, labHostIP
			if tc.dst != "" {
				dstIP, dstArg = ips[tc.dst], tc.dst
			}
			p := probe{ns, tc.src, tc.proto, dstIP, tc.port}
			waitTraffic(t, p, timedOut)
			r, _ := traceAndTraffic(t, p, "dropped", append([]string{"-n", ns, tc.src, dstArg}, protoArgs(p)...)...)
			res := r.result(t, labNodes[tc.node].name)
			end := last(res)
			if end.Action != report.ActionDropped || end.Component != report.ComponentNetworkPolicy || !strings.HasPrefix(end.ComponentInfo, tc.stage) {
				t.Errorf("%s's last observation %+v, want a NetworkPolicy drop in %s*", labNodes[tc.node].name, end, tc.stage)
			}
			if end.NetworkPolicy != tc.policy || !strings.Contains(end.NetworkPolicyRule, tc.ruleHas) {
				t.Errorf("the drop names policy %q rule %q; want %q, rule with %q", end.NetworkPolicy, end.NetworkPolicyRule, tc.policy, tc.ruleHas)
			}
			if tc.passPolicy != "" && !passedBy(res, tc.passPolicy) {
				t.Errorf("no hop on %s names %s passing the probe on; hops: %+v", labNodes[tc.node].name, tc.passPolicy, res.Observations)
			}
			assertNothingLeft(t)
		})
	}
}

// passedBy reports whether one of res's hops is an ACL of policy that let
// the probe go on (OVN's hops are observations, one a logical flow).
func passedBy(res report.NodeResult, policy string) bool {
	for _, o := range res.Observations {
		if o.NetworkPolicy == policy && o.Action != report.ActionDropped {
			return true
		}
	}
	return false
}
