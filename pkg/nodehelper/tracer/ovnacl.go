package tracer

import (
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// decidingACL names the policy behind a drop in OVN's ACL action stage.
// From OVN 23.06 on, an ACL's logical flow (ls_*_acl_eval, which carries
// the ACL's stage-hint) only records the verdict in a register; the drop
// itself is done in the stage after it (ls_*_acl_action) by a flow that
// belongs to no ACL. The ACL that decided is the last one the packet
// matched before, in the same switch and pipeline, where it is a drop or
// reject ACL; a drop after an allow (or with no ACL before it) names
// nothing. o is the observation of hop i of t; it comes back with the
// policy and rule where they are found.
func decidingACL(o report.Observation, t ofproto.Trace, i int, names Namer) report.Observation {
	if o.NetworkPolicy != "" || (o.Action != report.ActionDropped && o.Action != report.ActionRejected) || i < 0 || i >= len(t.Hops) {
		return o
	}
	at := names.NameHop(t.Hops[i]).OVN
	if at == nil || at.NBRow != "" || !strings.Contains(at.Stage, "_acl") {
		return o
	}
	pipeline := pipelineOf(at.Stage)
	for j := i - 1; j >= 0; j-- {
		n := names.NameHop(t.Hops[j]).OVN
		if n == nil || n.Datapath != at.Datapath || pipelineOf(n.Stage) != pipeline {
			continue
		}
		if n.ACLAction == "" {
			continue
		}
		if n.ACLAction != "drop" && n.ACLAction != "reject" {
			return o
		}
		o.NetworkPolicy, o.NetworkPolicyRule = n.NetworkPolicy, n.Rule
		return o
	}
	return o
}

// pipelineOf is the switch or router pipeline a stage is in ("ls_in",
// "lr_out"...).
func pipelineOf(stage string) string {
	parts := strings.SplitN(stage, "_", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[0] + "_" + parts[1]
}
