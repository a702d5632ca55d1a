package tracer

import (
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovn"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// From OVN 23.06 on an ACL's logical flow (ls_*_acl_eval) only records
// its verdict; the drop is done by ls_*_acl_action's flow, which belongs to
// no ACL. The drop names the ACL that decided, where that ACL drops.
func TestDecidingACL(t *testing.T) {
	dp := "d0000000-0000-0000-0000-000000000000"
	other := "e0000000-0000-0000-0000-000000000000"
	lf := func(uuid, d, stage, hint string) ovn.LogicalFlow {
		ids := map[string]string{"stage-name": stage}
		if hint != "" {
			ids["stage-hint"] = hint
		}
		return ovn.LogicalFlow{UUID: uuid, LogicalDatapath: &d, ExternalIDs: ids}
	}
	anp := map[string]string{"k8s.ovn.org/owner-type": "AdminNetworkPolicy", "k8s.ovn.org/name": "deny-b", "direction": "Ingress", "gress-index": "0"}
	names := OVNNames{Tables: TableNames{}, Names: ovn.Index(ovn.DB{
		Datapaths: []ovn.DatapathBinding{{UUID: dp, TunnelKey: 2, ExternalIDs: map[string]string{"name": "node-2"}}, {UUID: other, TunnelKey: 3, ExternalIDs: map[string]string{"name": "node-1"}}},
		LogicalFlows: []ovn.LogicalFlow{
			lf("10000001-0000-0000-0000-000000000000", dp, "ls_out_acl_eval", "a0000001"),
			lf("10000002-0000-0000-0000-000000000000", dp, "ls_out_acl_action", ""),
			lf("10000003-0000-0000-0000-000000000000", dp, "ls_out_acl_eval", "a0000002"),
			lf("10000004-0000-0000-0000-000000000000", other, "ls_out_acl_eval", "a0000001"),
			lf("10000005-0000-0000-0000-000000000000", dp, "ls_in_acl_eval", "a0000001"),
			lf("10000006-0000-0000-0000-000000000000", dp, "lr_in_ip_routing", ""),
		},
		ACLs: []ovn.ACL{
			{UUID: "a0000001-0000-0000-0000-000000000000", Direction: "to-lport", Priority: 29300, Action: "drop", ExternalIDs: anp},
			{UUID: "a0000002-0000-0000-0000-000000000000", Direction: "to-lport", Priority: 2000, Action: "allow-related"},
		},
	})}
	hop := func(cookie uint64) ofproto.Hop { return ofproto.Hop{Table: 40, Cookie: cookie} }
	drop := report.Observation{Component: report.ComponentNetworkPolicy, Action: report.ActionDropped}
	for _, c := range []struct {
		name   string
		hops   []ofproto.Hop
		policy string
		rule   string
	}{
		{"the drop ACL before the action stage", []ofproto.Hop{hop(0x10000001), hop(0x10000002)}, "AdminNetworkPolicy:deny-b", "ingress rule 0, priority 7"},
		{"the last ACL decides: an allow after it names nothing", []ofproto.Hop{hop(0x10000001), hop(0x10000003), hop(0x10000002)}, "", ""},
		{"an ACL on another switch is not this drop's", []ofproto.Hop{hop(0x10000004), hop(0x10000002)}, "", ""},
		{"an ACL of the other pipeline is not this drop's", []ofproto.Hop{hop(0x10000005), hop(0x10000002)}, "", ""},
		{"a drop outside the ACL stages names no ACL", []ofproto.Hop{hop(0x10000001), hop(0x10000006)}, "", ""},
		{"no ACL before the drop", []ofproto.Hop{hop(0x10000002)}, "", ""},
	} {
		tr := ofproto.Trace{Hops: c.hops}
		got := decidingACL(drop, tr, len(c.hops)-1, names)
		if got.NetworkPolicy != c.policy || got.NetworkPolicyRule != c.rule {
			t.Errorf("%s: %q %q, want %q %q", c.name, got.NetworkPolicy, got.NetworkPolicyRule, c.policy, c.rule)
		}
	}
	// A hop that forwards is not a drop to explain.
	fwd := report.Observation{Action: report.ActionForwarded}
	if got := decidingACL(fwd, ofproto.Trace{Hops: []ofproto.Hop{hop(0x10000001), hop(0x10000002)}}, 1, names); got != fwd {
		t.Errorf("a forwarding hop changed: %+v", got)
	}
}
