package ovn

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Name is what OVN says of one OpenFlow flow.
type Name struct {
	// Stage is the logical flow's stage (ls_in_acl, lr_in_ip_routing...);
	// empty for a physical flow.
	Stage string
	// Datapath names the logical switch or router the flow belongs to.
	Datapath string
	// LogicalFlow is the logical flow as ovn-sbctl lflow-list prints it,
	// or the port binding a physical flow comes from.
	LogicalFlow string
	// UUID is the southbound row's UUID.
	UUID string
	// Component is Antrea's component the stage belongs to.
	Component report.Component
	// ACL or LoadBalancer is the northbound row behind the stage-hint:
	// what it does and the Kubernetes object OVN-Kubernetes recorded on it.
	NBRow string
	// Object is the Kubernetes object behind the northbound row, from its
	// external_ids ("NetworkPolicy demo/deny-web", "Service demo/web").
	Object string
	// NetworkPolicy is the policy an ACL belongs to, as Antrea's
	// Traceflow names one: "namespace/name" for a NetworkPolicy,
	// "AdminNetworkPolicy:name", "BaselineAdminNetworkPolicy:name",
	// "EgressFirewall:namespace/default"; empty for a namespace's default
	// deny, which belongs to no one policy.
	NetworkPolicy string
	// Rule is the policy's rule the ACL carries out ("ingress rule 0",
	// "egress rule 1, priority 10" for an AdminNetworkPolicy, "rule 2" for
	// an EgressFirewall), from the index OVN-Kubernetes records; empty
	// where it records none.
	Rule string
	// Direction is an ACL's, from-lport (the pod's egress) or to-lport
	// (the pod's ingress).
	Direction string
	// ACLAction is an ACL's action (allow-related, drop, reject, pass).
	ACLAction string
}

// Where is the hop's name for a reader: the stage and the datapath.
func (n Name) Where() string {
	switch {
	case n.Stage != "" && n.Datapath != "":
		return n.Stage + " (" + n.Datapath + ")"
	case n.Stage != "":
		return n.Stage
	case n.Datapath != "":
		return n.LogicalFlow + " (" + n.Datapath + ")"
	}
	return n.LogicalFlow
}

// Names finds OVN's rows behind cookies.
type Names struct {
	byPrefix map[uint32][]Name
	// metadata of each name's datapath (tunnel key), in step with byPrefix.
	keys map[uint32][]int
}

// Index builds the lookup from what was read.
func Index(db DB) *Names {
	n := &Names{byPrefix: map[uint32][]Name{}, keys: map[uint32][]int{}}
	dps := map[string]DatapathBinding{}
	for _, d := range db.Datapaths {
		dps[d.UUID] = d
	}
	groups := map[string][]string{}
	for _, g := range db.DPGroups {
		groups[g.UUID] = g.Datapaths
	}
	acls := map[string]ACL{}
	for _, a := range db.ACLs {
		if len(a.UUID) >= 8 {
			acls[a.UUID[:8]] = a
		}
	}
	lbs := map[string]LoadBalancer{}
	for _, l := range db.LoadBalancers {
		if len(l.UUID) >= 8 {
			lbs[l.UUID[:8]] = l
		}
	}
	for _, lf := range db.LogicalFlows {
		p, ok := prefix(lf.UUID)
		if !ok {
			continue
		}
		var dpIDs []string
		if lf.LogicalDatapath != nil {
			dpIDs = append(dpIDs, *lf.LogicalDatapath)
		}
		if lf.LogicalDPGroup != nil {
			dpIDs = append(dpIDs, groups[*lf.LogicalDPGroup]...)
		}
		stage := lf.ExternalIDs["stage-name"]
		base := Name{
			Stage: stage, UUID: lf.UUID, Component: ComponentOf(stage),
			LogicalFlow: fmt.Sprintf("table=%d (%s), priority=%d, match=(%s), actions=(%s)", lf.TableID, stage, lf.Priority, lf.Match, lf.Actions),
		}
		if hint := lf.ExternalIDs["stage-hint"]; hint != "" {
			if a, ok := acls[hint]; ok {
				base.NBRow = fmt.Sprintf("ACL %s: %s, priority=%d, match=(%s), action=%s", a.UUID[:8], a.Direction, a.Priority, a.Match, a.Action)
				base.Direction, base.ACLAction = a.Direction, a.Action
				p := policyOf(a)
				base.Object, base.NetworkPolicy, base.Rule = p.object, p.ref, p.rule
			} else if l, ok := lbs[hint]; ok {
				base.NBRow = fmt.Sprintf("Load_Balancer %s %s", l.UUID[:8], l.Name)
				base.Object = ownedBy(l.ExternalIDs)
			}
		}
		if len(dpIDs) == 0 {
			n.add(p, base, -1)
		}
		for _, id := range dpIDs {
			nm := base
			d := dps[id]
			nm.Datapath = datapathName(d)
			n.add(p, nm, d.TunnelKey)
		}
	}
	for _, pb := range db.PortBindings {
		p, ok := prefix(pb.UUID)
		if !ok {
			continue
		}
		d := dps[pb.Datapath]
		what := "port binding " + pb.LogicalPort
		if pb.Type != "" {
			what += " (" + pb.Type + ")"
		}
		n.add(p, Name{Datapath: datapathName(d), LogicalFlow: what, UUID: pb.UUID, Component: report.ComponentForwarding}, d.TunnelKey)
	}
	return n
}

func (n *Names) add(p uint32, nm Name, key int) {
	n.byPrefix[p] = append(n.byPrefix[p], nm)
	n.keys[p] = append(n.keys[p], key)
}

// metadataRE finds the datapath a flow matches on: OVN keeps the logical
// datapath's tunnel key in the OpenFlow metadata register.
var metadataRE = regexp.MustCompile(`\bmetadata=(0x[0-9a-fA-F]+|\d+)\b`)

// Lookup returns OVN's name for a flow with cookie and match (as OVS's
// trace prints it). A logical flow shared by several datapaths (a
// datapath group) is named by the datapath the flow's match names. ok is
// false for a cookie no southbound row carries (OVN's fixed flows carry 0).
func (n *Names) Lookup(cookie uint64, match string) (Name, bool) {
	if n == nil || cookie == 0 || cookie>>32 != 0 {
		return Name{}, false
	}
	cands := n.byPrefix[uint32(cookie)]
	if len(cands) == 0 {
		return Name{}, false
	}
	if m := metadataRE.FindStringSubmatch(match); m != nil {
		if key, err := strconv.ParseInt(m[1], 0, 64); err == nil {
			for i, k := range n.keys[uint32(cookie)] {
				if int64(k) == key {
					return cands[i], true
				}
			}
		}
	}
	nm := cands[0]
	for _, c := range cands[1:] {
		if c.Datapath != nm.Datapath {
			// Shared by several datapaths and the match names none:
			// do not guess which.
			nm.Datapath = ""
		}
	}
	return nm, true
}

func prefix(uuid string) (uint32, bool) {
	if len(uuid) < 8 {
		return 0, false
	}
	v, err := strconv.ParseUint(uuid[:8], 16, 32)
	return uint32(v), err == nil
}

// datapathName is the logical switch's or router's name, as northd
// records it in the binding's external_ids.
func datapathName(d DatapathBinding) string {
	for _, k := range []string{"name", "name2", "logical-switch", "logical-router"} {
		if v := d.ExternalIDs[k]; v != "" {
			return v
		}
	}
	if d.UUID != "" {
		return "datapath " + strconv.Itoa(d.TunnelKey)
	}
	return ""
}

// ownedBy is the Kubernetes object OVN-Kubernetes recorded on a
// northbound row, as "KIND NAME": k8s.ovn.org/owner-type and
// k8s.ovn.org/name on the rows its libovsdb ops own (ACLs, port groups),
// k8s.ovn.org/kind and k8s.ovn.org/owner on a Service's load balancer
// ("Service", "NAMESPACE/NAME"); empty where it recorded neither.
func ownedBy(ids map[string]string) string {
	for _, k := range [][2]string{{keyOwnerType, keyName}, {keyLBKind, keyLBOwner}} {
		if kind, name := ids[k[0]], ids[k[1]]; kind != "" && name != "" {
			return kind + " " + name
		}
	}
	return ""
}

// ComponentOf maps an OVN stage to Antrea's component: ACL stages to
// NetworkPolicy, load-balancer and DNAT stages to LB, routing and router
// policy stages to Routing, the rest to Forwarding.
func ComponentOf(stage string) report.Component {
	parts := strings.Split(stage, "_")
	has := func(w ...string) bool {
		for _, p := range parts {
			for _, x := range w {
				if p == x {
					return true
				}
			}
		}
		return false
	}
	switch {
	case has("acl"):
		return report.ComponentNetworkPolicy
	case has("lb", "dnat", "affinity") || strings.Contains(stage, "_lb_"):
		return report.ComponentLB
	case has("routing", "policy"):
		return report.ComponentRouting
	}
	return report.ComponentForwarding
}
