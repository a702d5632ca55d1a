package tracer

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/antreaagent"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// A policy rule's hop on Antrea's pipeline carries the rule's conjunction
// id: in the match of the rule table's flow (conj_id=N), or, for a drop or
// reject rule, in the match of the metric table's flow (reg3=N, where the
// rule flow loaded it).
var (
	conjIDMatch = regexp.MustCompile(`(?:^|,)conj_id=(\d+)`)
	reg3Match   = regexp.MustCompile(`(?:^|,)reg3=(0x[0-9a-fA-F]+|\d+)`)
)

// ruleConj is the conjunction id of the policy rule behind hop, if any.
func ruleConj(hop *report.Hop) (uint32, bool) {
	m := conjIDMatch.FindStringSubmatch(hop.Flow)
	if m == nil && strings.HasSuffix(hop.TableName, "Metric") {
		m = reg3Match.FindStringSubmatch(hop.Flow)
	}
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseUint(m[1], 0, 32)
	if err != nil || n == 0 {
		return 0, false
	}
	return uint32(n), true
}

// nameRule names the policy and rule of a hop through a policy rule, where
// the trace has a RuleNamer and the hop is not named yet. Where the namer
// cannot, the hop's PolicyUnknown says why. The lookups of one trace share
// antreaagent.Budget.
func (s *session) nameRule(ctx context.Context, o *report.Observation, hop *report.Hop) {
	if s.c.Rules == nil || o.NetworkPolicy != "" {
		return
	}
	conj, ok := ruleConj(hop)
	if !ok {
		return
	}
	if s.rulesUntil.IsZero() {
		// Never into the last quarter of the trace's time: the plugin
		// must still get the verdict before its own timeout.
		s.rulesUntil = time.Now().Add(antreaagent.Budget)
		if end := s.start.Add(s.c.Timeout * 3 / 4); end.Before(s.rulesUntil) {
			s.rulesUntil = end
		}
	}
	lctx, cancel := context.WithDeadline(ctx, s.rulesUntil)
	defer cancel()
	r, err := s.c.Rules.RuleOf(lctx, conj, hop.TableName)
	if err != nil {
		hop.PolicyUnknown = err.Error()
		s.c.Logf("conjunction %d: %v", conj, err)
		return
	}
	o.NetworkPolicy, o.NetworkPolicyRule = r.Policy, r.Name
}
