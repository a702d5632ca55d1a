package ovn

import (
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

func TestComponentOf(t *testing.T) {
	for stage, want := range map[string]report.Component{
		"ls_in_acl":            report.ComponentNetworkPolicy,
		"ls_out_acl":           report.ComponentNetworkPolicy,
		"ls_in_acl_after_lb":   report.ComponentNetworkPolicy,
		"ls_in_pre_acl":        report.ComponentNetworkPolicy,
		"ls_in_lb":             report.ComponentLB,
		"ls_in_pre_lb":         report.ComponentLB,
		"lr_in_lb_aff_learn":   report.ComponentLB,
		"lr_in_dnat":           report.ComponentLB,
		"lr_in_ip_routing":     report.ComponentRouting,
		"lr_in_ip_routing_pre": report.ComponentRouting,
		"lr_in_policy":         report.ComponentRouting,
		"ls_in_l2_lkup":        report.ComponentForwarding,
		"ls_in_check_port_sec": report.ComponentForwarding,
		"":                     report.ComponentForwarding,
	} {
		if got := ComponentOf(stage); got != want {
			t.Errorf("ComponentOf(%q) = %s, want %s", stage, got, want)
		}
	}
}

func TestEndpoints(t *testing.T) {
	for remote, want := range map[string][2]string{
		"unix:/var/run/ovn/ovnsb_db.sock":     {"unix:/var/run/ovn/ovnsb_db.sock", "unix:/var/run/ovn/ovnnb_db.sock"},
		"tcp:10.0.0.1:6642":                   {"tcp:10.0.0.1:6642", "tcp:10.0.0.1:6641"},
		"tcp:10.0.0.1:6642,tcp:10.0.0.2:6642": {"tcp:10.0.0.1:6642", "tcp:10.0.0.1:6641"},
		"ssl:10.0.0.1:6642":                   {"", ""},
		"":                                    {"", ""},
		"punix:/x":                            {"", ""},
	} {
		sb, nb, err := Endpoints(remote)
		if sb != want[0] || nb != want[1] || (want[0] == "") != (err != nil) {
			t.Errorf("Endpoints(%q) = %q %q %v, want %q %q", remote, sb, nb, err, want[0], want[1])
		}
	}
	if _, _, err := Endpoints("ssl:10.0.0.1:6642"); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("a TLS remote does not say why: %v", err)
	}
}

// A logical flow shared by several datapaths (a datapath group) is named
// by the datapath the OpenFlow flow's match names; without one, by none.
func TestLookupDatapathGroup(t *testing.T) {
	dp := "11111111-0000-0000-0000-000000000000"
	grp := "22222222-0000-0000-0000-000000000000"
	n := Index(DB{
		Datapaths: []DatapathBinding{{UUID: dp, TunnelKey: 2, ExternalIDs: map[string]string{"name": "node-1"}},
			{UUID: "33333333-0000-0000-0000-000000000000", TunnelKey: 3, ExternalIDs: map[string]string{"name": "node-2"}}},
		DPGroups:     []DPGroup{{UUID: grp, Datapaths: []string{dp, "33333333-0000-0000-0000-000000000000"}}},
		LogicalFlows: []LogicalFlow{{UUID: "abcdef01-0000-0000-0000-000000000000", LogicalDPGroup: &grp, Pipeline: "ingress", ExternalIDs: map[string]string{"stage-name": "ls_in_acl"}}},
	})
	if nm, ok := n.Lookup(0xabcdef01, "ip,reg0=0x1/0x1,metadata=0x3"); !ok || nm.Datapath != "node-2" || nm.Stage != "ls_in_acl" {
		t.Errorf("metadata=0x3: %+v %v", nm, ok)
	}
	if nm, ok := n.Lookup(0xabcdef01, "ip"); !ok || nm.Datapath != "" {
		t.Errorf("no metadata in the match: %+v %v", nm, ok)
	}
	if _, ok := n.Lookup(0x7466abcdef01, "ip"); ok {
		t.Error("a cookie above 32 bits (the helper's own) named by OVN")
	}
}

func FuzzIndexLookup(f *testing.F) {
	f.Add("abcdef01-0000", "ls_in_acl", "8c71ceab", uint64(0xabcdef01), "metadata=0x3")
	f.Add("", "", "", uint64(0), "")
	f.Fuzz(func(t *testing.T, uuid, stage, hint string, cookie uint64, match string) {
		dp := uuid
		n := Index(DB{
			LogicalFlows: []LogicalFlow{{UUID: uuid, LogicalDatapath: &dp, ExternalIDs: map[string]string{"stage-name": stage, "stage-hint": hint}}},
			Datapaths:    []DatapathBinding{{UUID: uuid}},
			PortBindings: []PortBinding{{UUID: uuid, Datapath: uuid}},
			ACLs:         []ACL{{UUID: hint + uuid}},
		})
		_, _ = n.Lookup(cookie, match)
	})
}

// The ACLs OVN-Kubernetes writes name their policy in external_ids, each
// kind with its own keys (its libovsdb ops' object ID types).
func TestPolicyOf(t *testing.T) {
	owner := func(kind, name string, kv ...string) map[string]string {
		m := map[string]string{"k8s.ovn.org/owner-controller": "default-network-controller", "k8s.ovn.org/owner-type": kind, "k8s.ovn.org/name": name}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name   string
		acl    ACL
		object string
		ref    string
		rule   string
	}{
		{"NetworkPolicy rule", ACL{Priority: 1001, ExternalIDs: owner("NetworkPolicy", "demo:web", "direction", "Ingress", "gress-index", "0", "port-policy-protocol", "TCP", "ip-block-index", "-1")},
			"NetworkPolicy demo/web", "demo/web", "ingress rule 0"},
		{"namespace default deny", ACL{Priority: 1000, Action: "drop", ExternalIDs: owner("NetpolNamespace", "demo", "direction", "Egress", "type", "defaultDeny")},
			"the egress default deny of namespace demo's NetworkPolicies", "", ""},
		{"namespace ARP allow", ACL{Priority: 1001, ExternalIDs: owner("NetpolNamespace", "demo", "direction", "Ingress", "type", "arpAllow")},
			"the ingress default deny (arpAllow) of namespace demo's NetworkPolicies", "", ""},
		// ANP of priority 7: ACL priorities 29300 down, rule i at 29300-i.
		{"AdminNetworkPolicy", ACL{Priority: 29299, Action: "drop", ExternalIDs: owner("AdminNetworkPolicy", "deny-b", "direction", "Egress", "gress-index", "1", "port-policy-protocol", "None")},
			"AdminNetworkPolicy deny-b", "AdminNetworkPolicy:deny-b", "egress rule 1, priority 7"},
		{"AdminNetworkPolicy priority 99", ACL{Priority: 20100, ExternalIDs: owner("AdminNetworkPolicy", "last", "direction", "Ingress", "gress-index", "0")},
			"AdminNetworkPolicy last", "AdminNetworkPolicy:last", "ingress rule 0, priority 99"},
		{"BaselineAdminNetworkPolicy", ACL{Priority: 1749, Action: "drop", ExternalIDs: owner("BaselineAdminNetworkPolicy", "default", "direction", "Ingress", "gress-index", "1")},
			"BaselineAdminNetworkPolicy default", "BaselineAdminNetworkPolicy:default", "ingress rule 1"},
		{"EgressFirewall", ACL{Priority: 9999, Action: "drop", ExternalIDs: owner("EgressFirewall", "demo", "rule-index", "1")},
			"EgressFirewall demo/default", "EgressFirewall:demo/default", "rule 1"},
		{"an owner not known", ACL{ExternalIDs: owner("MulticastCluster", "x", "type", "DefaultDeny")}, "MulticastCluster x", "", ""},
		{"a NetworkPolicy name without a namespace", ACL{ExternalIDs: owner("NetworkPolicy", "web")}, "NetworkPolicy web", "", ""},
		{"no owner", ACL{ExternalIDs: map[string]string{"name": "x"}}, "", "", ""},
	} {
		p := policyOf(c.acl)
		if p.object != c.object || p.ref != c.ref || p.rule != c.rule {
			t.Errorf("%s: policyOf = %+v, want object %q ref %q rule %q", c.name, p, c.object, c.ref, c.rule)
		}
	}
}

// A Service's load balancer is owned by k8s.ovn.org/kind and
// k8s.ovn.org/owner; the rows of OVN-Kubernetes' libovsdb ops by
// k8s.ovn.org/owner-type and k8s.ovn.org/name.
func TestOwnedBy(t *testing.T) {
	for _, c := range []struct {
		ids  map[string]string
		want string
	}{
		{map[string]string{"k8s.ovn.org/kind": "Service", "k8s.ovn.org/owner": "demo/web"}, "Service demo/web"},
		{map[string]string{"k8s.ovn.org/owner-type": "Service", "k8s.ovn.org/name": "demo/web"}, "Service demo/web"},
		{map[string]string{"k8s.ovn.org/kind": "Service"}, ""},
		{nil, ""},
	} {
		if got := ownedBy(c.ids); got != c.want {
			t.Errorf("ownedBy(%v) = %q, want %q", c.ids, got, c.want)
		}
	}
}
