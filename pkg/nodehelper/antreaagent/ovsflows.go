package antreaagent

import (
	"context"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// flowLine is one flow as the agent prints it (ovs-ofctl dump-flows
// --names): "table=NAME, n_packets=0, ..., priority=P,conj_id=N,ip actions=...".
var (
	tableField = regexp.MustCompile(`(?:^|[ ,])table=([^, ]+)`)
	prioField  = regexp.MustCompile(`(?:^|[ ,])priority=(\d+)`)
	conjField  = regexp.MustCompile(`(?:^|[ ,])conj_id=(\d+)`)
)

// actionFlow is a rule's flow: the one that matches its conjunction id.
type actionFlow struct {
	table    string
	priority int
	conj     uint32
	actions  string
}

func parseActionFlow(s string) (actionFlow, bool) {
	match, actions, ok := strings.Cut(s, " actions=")
	if !ok {
		return actionFlow{}, false
	}
	c := conjField.FindStringSubmatch(match)
	t := tableField.FindStringSubmatch(match)
	p := prioField.FindStringSubmatch(match)
	if c == nil || t == nil || p == nil {
		return actionFlow{}, false
	}
	conj, err := strconv.ParseUint(c[1], 10, 32)
	if err != nil {
		return actionFlow{}, false
	}
	prio, _ := strconv.Atoi(p[1])
	return actionFlow{table: t[1], priority: prio, conj: uint32(conj), actions: actions}, true
}

// load asks for policy p's flows and names each of its conjunction ids.
func (c *Client) load(ctx context.Context, p policy) (map[uint32]Rule, error) {
	q := url.Values{"networkpolicy": {p.SourceRef.Name}, "type": {typeShorthand[p.SourceRef.Type]}}
	if p.SourceRef.Namespace != "" {
		q.Set("namespace", p.SourceRef.Namespace)
	}
	var flows []struct {
		Flow string `json:"flow"`
	}
	if err := c.get(ctx, "/ovsflows?"+q.Encode(), &flows); err != nil {
		return nil, err
	}
	byDir := map[string][]actionFlow{}
	seen := map[uint32]bool{}
	for _, f := range flows {
		a, ok := parseActionFlow(f.Flow)
		if !ok || seen[a.conj] {
			continue
		}
		seen[a.conj] = true
		d := direction(a.table)
		byDir[d] = append(byDir[d], a)
	}
	rules := map[uint32]Rule{}
	for d, fl := range byDir {
		names := lineUp(p, d, fl)
		for _, a := range fl {
			rules[a.conj] = Rule{Policy: p.ref(), Name: names[a.conj]}
		}
	}
	return rules, nil
}

// lineUp names the rules of policy p in direction dir by their flows:
// sorted by OVS priority (highest first) they are p's rules in dir sorted
// by rule priority (lowest first). It names nothing unless the two lists
// are as long, the priorities of either distinct, and each flow's action
// agrees with its rule's.
func lineUp(p policy, dir string, flows []actionFlow) map[uint32]string {
	type rule struct {
		name, action string
		priority     int32
	}
	var rules []rule
	for _, r := range p.Rules {
		if r.Direction == dir {
			rules = append(rules, rule{r.Name, r.Action, r.Priority})
		}
	}
	if dir == "" || len(rules) != len(flows) {
		return nil
	}
	sort.SliceStable(rules, func(a, b int) bool { return rules[a].priority < rules[b].priority })
	sort.SliceStable(flows, func(a, b int) bool { return flows[a].priority > flows[b].priority })
	names := map[uint32]string{}
	for i := range rules {
		if i > 0 && (rules[i].priority == rules[i-1].priority || flows[i].priority == flows[i-1].priority) {
			return nil
		}
		if !actionAgrees(rules[i].action, flows[i].actions) {
			return nil
		}
		names[flows[i].conj] = rules[i].name
	}
	return names
}

// actionAgrees reports whether a rule flow's actions carry out the rule's
// action as Antrea v2.3.2 writes them: an Allow commits the connection
// (with the rule's id in its label, ct(commit,...)), a Drop loads the
// rule's id and goes on to the metric table without committing, a Reject
// hands the packet to the agent (a group or controller action).
// Kubernetes rules have no action (Allow). Other actions (Pass) are not
// checked.
func actionAgrees(action, actions string) bool {
	switch action {
	case "", "Allow":
		return strings.Contains(actions, "ct(commit")
	case "Drop":
		return !strings.Contains(actions, "ct(commit") && !strings.Contains(actions, "group:") && !strings.Contains(actions, "controller")
	case "Reject":
		return strings.Contains(actions, "group:") || strings.Contains(actions, "controller")
	}
	return true
}

// direction is "In" for an ingress table, "Out" for an egress one, as
// controlplane rules say it.
func direction(table string) string {
	switch {
	case strings.Contains(table, "Ingress"):
		return "In"
	case strings.Contains(table, "Egress"):
		return "Out"
	}
	return ""
}
