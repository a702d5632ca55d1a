package tracer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/antreaagent"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
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

// ruleConj is the conjunction id of the policy rule behind a hop through
// table (its name) whose flow matches flow, if any.
func ruleConj(table, flow string) (uint32, bool) {
	m := conjIDMatch.FindStringSubmatch(flow)
	if m == nil && strings.HasSuffix(table, "Metric") {
		m = reg3Match.FindStringSubmatch(flow)
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

// ruleLookup is the lookup of one conjunction id's rule, started once per
// trace and read by every hop through the rule.
type ruleLookup struct {
	done chan struct{}
	rule antreaagent.Rule
	err  error
}

// rulesDeadline is when the lookups of a trace give up: never in the last
// quarter of the trace's time, which the plugin needs to get the verdict
// before its own timeout.
func (s *session) rulesDeadline() time.Time { return s.start.Add(s.c.Timeout * 3 / 4) }

// lookupRule returns conj's lookup, starting it if no trace of this session
// has. The agent may take seconds to answer (antreaagent.Client.RuleOf), so
// lookups start as soon as a trace from OVS shows a rule (warmRules), while
// the probe is still being sent, and run until rulesDeadline.
func (s *session) lookupRule(conj uint32, table string) *ruleLookup {
	if l, ok := s.lookups[conj]; ok {
		return l
	}
	if s.lookups == nil {
		s.lookups = map[uint32]*ruleLookup{}
		s.rulesCtx, s.rulesCancel = context.WithDeadline(context.Background(), s.rulesDeadline())
	}
	l := &ruleLookup{done: make(chan struct{})}
	s.lookups[conj] = l
	start := time.Now()
	go func() {
		defer close(l.done)
		l.rule, l.err = s.c.Rules.RuleOf(s.rulesCtx, conj, table)
		if l.err == nil {
			s.c.Logf("conjunction %d is %s rule %q (Antrea's agent, %s)", conj, l.rule.Policy, l.rule.Name, time.Since(start).Round(time.Millisecond))
		}
		if errors.Is(l.err, context.DeadlineExceeded) {
			l.err = fmt.Errorf("no answer from Antrea's agent within %s on which rule conjunction %d is (it lists a policy's flows one ovs-ofctl call at a time)",
				time.Since(start).Round(100*time.Millisecond), conj)
		}
	}()
	return l
}

// warmRules starts the lookup of every rule that t, a trace from OVS of the
// probe, passes through.
func (s *session) warmRules(t ofproto.Trace) {
	if s.c.Rules == nil {
		return
	}
	for _, h := range t.Hops {
		if h.NoMatch {
			continue
		}
		table := s.names.NameHop(h).Table
		if conj, ok := ruleConj(table, h.Match); ok {
			s.lookupRule(conj, table)
		}
	}
}

// stopRules ends the lookups still running (the trace is over).
func (s *session) stopRules() {
	if s.rulesCancel != nil {
		s.rulesCancel()
	}
}

// nameRule names the policy and rule of a hop through a policy rule, where
// the trace has a RuleNamer and the hop is not named yet. Where the namer
// cannot, the hop's PolicyUnknown says why.
func (s *session) nameRule(ctx context.Context, o *report.Observation, hop *report.Hop) {
	if s.c.Rules == nil || o.NetworkPolicy != "" {
		return
	}
	conj, ok := ruleConj(hop.TableName, hop.Flow)
	if !ok {
		return
	}
	l := s.lookupRule(conj, hop.TableName)
	select {
	case <-l.done:
	case <-ctx.Done():
		hop.PolicyUnknown = "the trace ended before Antrea's agent named the rule: " + ctx.Err().Error()
		return
	}
	if l.err != nil {
		hop.PolicyUnknown = l.err.Error()
		s.c.Logf("conjunction %d: %v", conj, l.err)
		return
	}
	o.NetworkPolicy, o.NetworkPolicyRule = l.rule.Policy, l.rule.Name
}
