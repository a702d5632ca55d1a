package tracer

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovn"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// componentRules map table names to Antrea's components; the first rule
// that matches wins, so NetworkPolicy's "EgressRule" is tested before the
// Egress feature's "EgressMark".
var componentRules = []struct {
	re *regexp.Regexp
	c  report.Component
}{
	{regexp.MustCompile(`(?i)spoofguard`), report.ComponentSpoofGuard},
	{regexp.MustCompile(`(?i)(ingress|egress)(rule|defaultrule|metric|securityclassifier)|networkpolicy|policy|acl`), report.ComponentNetworkPolicy},
	{regexp.MustCompile(`(?i)service|endpoint|dnat|sessionaffinity|\blb\b|loadbalanc`), report.ComponentLB},
	{regexp.MustCompile(`(?i)egress|snat`), report.ComponentEgress},
	{regexp.MustCompile(`(?i)l3forwarding|l3dec|routing|route`), report.ComponentRouting},
}

// Component maps a table name to Antrea's component; tables no rule names
// (Classifier, conntrack, output, unnamed tables) belong to Forwarding.
func Component(tableName string) report.Component {
	for _, r := range componentRules {
		if r.re.MatchString(tableName) {
			return r.c
		}
	}
	return report.ComponentForwarding
}

// Namer names hops in the words of the pipeline's maker.
type Namer interface {
	NameHop(h ofproto.Hop) HopName
}

// HopName is a hop's name.
type HopName struct {
	// Table is the table's or OVN stage's name, "" where it has none.
	Table string
	// Where names the hop for a reader: the table's name, the OVN stage
	// and datapath, or "table N".
	Where     string
	Component report.Component
	// OVN is OVN's account of the hop's flow, where OVN programs the
	// bridge and its southbound database was read.
	OVN *ovn.Name
}

// NameHop names a hop by its table's name.
func (t TableNames) NameHop(h ofproto.Hop) HopName {
	return HopName{Table: t[h.Table], Where: t.Name(h.Table), Component: Component(t[h.Table])}
}

// OVNNames names hops by the OVN rows behind their cookies, and hops
// whose cookie no row carries (OVN's fixed flows) by their table.
type OVNNames struct {
	Tables TableNames
	Names  *ovn.Names
}

// NameHop names a hop by OVN's logical flow (stage, datapath) or port
// binding behind its cookie.
func (o OVNNames) NameHop(h ofproto.Hop) HopName {
	if h.NoMatch {
		return o.Tables.NameHop(h)
	}
	n, ok := o.Names.Lookup(h.Cookie, h.Match)
	if !ok {
		return o.Tables.NameHop(h)
	}
	table := n.Stage
	return HopName{Table: table, Where: n.Where(), Component: n.Component, OVN: &n}
}

// TableNames maps table ids to names; unnamed tables are absent.
type TableNames map[uint8]string

// Name returns the table's name, or "table N".
func (t TableNames) Name(id uint8) string {
	if n, ok := t[id]; ok && n != "" {
		return n
	}
	return fmt.Sprintf("table %d", id)
}

// Verdict is what happened to the probe at a hop.
type Verdict struct {
	Action report.Action
	// Port is the port the hop outputs to, if any.
	Port *ovsdb.Port
	// TunnelDst is the tunnel's remote IP for an output into a tunnel.
	TunnelDst string
	// PortName names the port left by where it is not one of the traced
	// bridge's ports in OVSDB (another bridge's port, a port dpif/show
	// knows and the snapshot does not).
	PortName string
	// Also are the packet's other outputs where the datapath sends it to
	// several ports; the verdict is the destination's (a pod's) output.
	Also []Verdict
	// Open is true where OVS's trace ends in a recirculation it did not
	// follow (a dp_hash select group, a tunnel's decapsulation): the packet
	// goes on, and where to is not known yet.
	Open bool
	// Held is true where the pipeline's agent keeps the packet and sends
	// it on later, out of OVS's sight: OVN's arp and nd_ns actions, which
	// ovn-controller answers by resolving the next hop's MAC and sending
	// the packet once the MAC is learned. Not a drop, and not followed:
	// the trace is not complete (Open is set too).
	Held bool
	// Reason says, in OVS's words, why (the datapath actions, the reject's
	// userdata).
	Reason string
}

// Classify says what a hop's own actions do with the packet: output to a
// pod port (Delivered), into a tunnel (Forwarded with the tunnel's
// destination), to any other port (ForwardedOutOfNetwork), ask the agent to
// reject it (Rejected, see IsReject), drop it (Dropped), or pass it to
// another table (Forwarded). It knows only the hop; Final decides a path
// from OVS's datapath actions, and uses Classify only where a trace has
// none.
func Classify(h ofproto.Hop, br *ovsdb.Bridge, tunnelDst string) Verdict {
	if h.Drops() {
		return Verdict{Action: report.ActionDropped}
	}
	var p *ovsdb.Port
	outs := h.Outputs()
	if len(outs) > 0 {
		p = br.ByOfport(outs[len(outs)-1])
	}
	if p != nil && p.IsTunnel() {
		// An output into a tunnel counts even where the trace remarks
		// ">> Not tunneling to our own address": ofproto/trace says so for a
		// pass resumed after conntrack that the datapath tunnels fine.
		return portVerdict(p, tunnelDst)
	}
	for _, a := range h.Actions {
		// OVS marks what it could not do with ">>" ("Nonexistent output
		// port", "Too many resubmits"): the packet goes nowhere.
		if strings.HasPrefix(a, ">>") && len(outs) == 0 {
			return Verdict{Action: report.ActionDropped}
		}
	}
	for _, c := range h.Controllers() {
		if IsReject(c) {
			return Verdict{Action: report.ActionRejected}
		}
		if IsNextHopResolution(c) {
			return heldForNextHop(c)
		}
	}
	if len(outs) == 0 {
		return Verdict{Action: report.ActionForwarded}
	}
	v := portVerdict(p, "")
	if p == nil {
		v.PortName = outs[len(outs)-1]
	}
	return v
}

// Final is the verdict of a whole path and the index of the hop that
// decided it (-1 for a trace without hops). The verdict is the packet's
// real fate, the datapath actions of the last pass (see fateVerdict); a
// trace without them (text OVS did not finish) falls back to the hops' own
// actions: the first hop that outputs, rejects or drops decides, and a
// path that ends without either was dropped where it ended.
func Final(t ofproto.Trace, br *ovsdb.Bridge) (int, Verdict) {
	if len(t.Hops) == 0 {
		return -1, Verdict{Action: report.ActionDropped, Reason: "OVS's trace has no hops in bridge " + t.Bridge}
	}
	if t.DatapathActions != "" {
		return fateVerdict(t, br)
	}
	for i, h := range t.Hops {
		v := Classify(h, br, t.TunnelDst)
		if v.Action != report.ActionForwarded || v.Port != nil || v.Held {
			return i, v
		}
	}
	return len(t.Hops) - 1, Verdict{Action: report.ActionDropped}
}

// Observation builds the Antrea-shaped observation of hop i.
func Observation(h ofproto.Hop, v Verdict, names Namer) report.Observation {
	hn := names.NameHop(h)
	o := report.Observation{
		Component:     hn.Component,
		ComponentInfo: hn.Where,
		Action:        v.Action,
	}
	if hn.OVN != nil && hn.OVN.NetworkPolicy != "" && o.Component == report.ComponentNetworkPolicy {
		o.NetworkPolicy, o.NetworkPolicyRule = hn.OVN.NetworkPolicy, hn.OVN.Rule
	}
	switch v.Action {
	case report.ActionDelivered:
		o.Component = report.ComponentForwarding
		o.Pod = v.Port.PodName()
	case report.ActionForwarded:
		if v.Port != nil {
			o.Component = report.ComponentForwarding
			o.TunnelDstIP = v.TunnelDst
		}
	case report.ActionForwardedOutOfNetwork:
		o.Component = report.ComponentForwarding
	}
	return o
}

// HopReport is the explanation of hop i for the report.
func HopReport(i int, h ofproto.Hop, names Namer, observed bool) report.Hop {
	flow := h.Match
	if h.NoMatch {
		flow = ""
	}
	r := report.Hop{
		Index: i, Table: h.Table, Flow: flow, Priority: h.Priority,
		Actions: h.Actions, NoMatch: h.NoMatch, Observed: observed,
	}
	hn := names.NameHop(h)
	r.TableName = hn.Table
	if n := hn.OVN; n != nil {
		r.OVN = &report.OVNHop{Stage: n.Stage, Datapath: n.Datapath, LogicalFlow: n.LogicalFlow, UUID: n.UUID, NBRow: n.NBRow, Object: n.Object}
	}
	if !h.NoMatch {
		r.Cookie = fmt.Sprintf("%#x", h.Cookie)
	}
	return r
}
