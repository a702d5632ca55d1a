package view

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/termsafe"
)

// Plain renders one stable line per update: a time since the trace started,
// an event word, then key=value fields. Values that are not plain words are
// quoted with Go syntax, which also escapes anything a terminal would
// interpret, so cluster strings cannot inject escape codes.
type Plain struct {
	W io.Writer
	// Explain prints every hop (on Antrea's pipeline, not only the ones
	// Antrea's agent reports) with its OVS table, flow and cookie.
	Explain bool
}

// Write renders u, which has just been applied to m.
func (p Plain) Write(m *outcome.Model, u outcome.Update) error {
	text := p.line(m, u)
	if text == "" {
		return nil
	}
	for _, line := range strings.Split(text, "\n") {
		if _, err := fmt.Fprintf(p.W, "%-9s %s\n", "+"+fmtDur(sub(u.When(), m.Started)), line); err != nil {
			return err
		}
	}
	return nil
}

func (p Plain) line(m *outcome.Model, u outcome.Update) string {
	switch u := u.(type) {
	case outcome.TraceStarted:
		return kv("trace", "name", u.Name, "engine", u.Engine, "why", u.EngineReason,
			"source", u.Source, "destination", u.Destination, "packet", u.Packet, "tag", dscp.Name(u.Tag))
	case outcome.HelperWaiting:
		return kv("waiting", "node", u.Node, "role", string(u.Role), "for", u.Reason)
	case outcome.HelperReady:
		return kv("ready", "node", u.Node, "role", string(u.Role), "helper", u.Version)
	case outcome.Injected:
		return kv("injected", "node", u.Node)
	case outcome.Observed:
		h := u.Hop
		if p.Explain || h.Role == report.RoleReply {
			// The answer's hops are its nodes' every hop: Antrea's
			// summary is of a probe's way, not an answer's.
			return p.hop(m, u, h.Observation, true)
		}
		// Antrea's words: only what Antrea's agent reports, as it reports
		// it (a rule hop waits for the end of the node's path, which may
		// show it was the rule that dropped the packet); -o wide prints
		// every table.
		var lines []string
		for _, o := range m.NewInSummary(h.Node) {
			lines = append(lines, p.hop(m, u, o, false))
		}
		return strings.Join(lines, "\n")
	case outcome.Warning:
		return kv("warning", "node", u.Node, "message", u.Message)
	case outcome.Retried:
		return kv("retry", "why", u.Why)
	case outcome.Finished:
		line := kv("verdict", "result", string(u.Verdict), "predicted", trueOrEmpty(u.Predicted()), "reason", u.Reason)
		if r := u.Reply; r != nil {
			line += "\n" + kv("reply", "result", string(r.Fate), "answer", r.Answer, "reason", r.Reason)
		}
		return line
	}
	return ""
}

// hop is the line of observation o, seen with u; explain adds u's table,
// flow and cookie.
func (p Plain) hop(m *outcome.Model, u outcome.Observed, o report.Observation, explain bool) string {
	h := u.Hop
	direction := ""
	if h.Role == report.RoleReply {
		direction = "reply"
	}
	fields := []string{"node", h.Node, "direction", direction, "component", string(o.Component), "action", string(o.Action.Normalize()),
		"inferred", trueOrEmpty(o.Inferred), "info", o.ComponentInfo, "since_injection", fmtDur(m.Since(u.Time))}
	fields = append(fields, detailFields(o)...)
	if explain {
		fields = append(fields, "table", tableRef(h), "flow", h.Flow, "cookie", h.CookieHex())
	}
	return kv("hop", fields...)
}

// Summary is the one line a CI log reader looks for: pass or fail, the
// verdict (and whether it was only predicted), the path, how many hops it
// has and how many of them were inferred rather than seen, and the exit
// code. every says whether the output above it showed every table hop
// (-o wide, --explain) or, on Antrea's pipeline, Antrea's summary of them:
// the line counts the hops the reader was shown.
func Summary(m *outcome.Model, want outcome.Expect, every bool) string {
	code, _ := m.ExitCode(want)
	status := "PASS"
	if code != 0 {
		status = "FAIL"
	}
	if want == "" {
		want = outcome.ExpectDelivered
	}
	// The path is the nodes the probe was seen or traced on; a receiver
	// the probe never reached is not on it.
	var path []string
	for _, n := range m.Nodes {
		if len(n.Hops) > 0 && n.Role != report.RoleReply {
			path = append(path, n.Name)
		}
	}
	via := ""
	if len(path) > 0 {
		via = " via " + strings.Join(path, " -> ")
	}
	return fmt.Sprintf("%s: %s -> %s (%s) %s%s%s; %s; expected %s (exit %d)",
		status, quoteIfNeeded(m.Trace.Source), quoteIfNeeded(m.Trace.Destination), m.Trace.Packet, verdictText(m),
		via, replyText(m), hopCount(m, every), want, code)
}

// replyText says what came back, for a round trip: ", answer Answered
// (SYN-ACK from 10.0.1.5) via b -> a".
func replyText(m *outcome.Model) string {
	if m.Finished == nil || m.Finished.Reply == nil {
		return ""
	}
	r := m.Finished.Reply
	s := ", answer " + string(r.Fate)
	if r.Answer != "" {
		s += " (" + r.Answer + ")"
	}
	var path []string
	for _, n := range m.Nodes {
		if n.Role == report.RoleReply && len(n.Hops) > 0 {
			path = append(path, n.Name)
		}
	}
	if len(path) > 0 {
		s += " via " + strings.Join(path, " -> ")
	}
	return s
}

// verdictText is the verdict, saying so when only OVS's trace predicted it.
func verdictText(m *outcome.Model) string {
	v := string(m.Verdict())
	if m.Finished != nil && m.Finished.Predicted() {
		v += " " + predictedNote
	}
	return v
}

// predictedNote marks a verdict that rests on an inferred hop.
const predictedNote = "(predicted by OVS's trace, not observed)"

// hopCount says how many hops the output showed and how many of them were
// only inferred: "3 hops, 1 inferred from OVS's trace". Where those are
// Antrea's summary of more table hops it says how many, so that the count
// next to the summary is the summary's and the table count is not lost:
// "4 hops (summarised from 49 table hops)".
func hopCount(m *outcome.Model, every bool) string {
	hops, inferred := m.Counts()
	tables := hops
	if !every {
		hops, inferred = m.SummaryCounts()
	}
	s := plural(hops, "hop")
	if tables != hops {
		s += fmt.Sprintf(" (summarised from %s)", plural(tables, "table hop"))
	}
	if inferred > 0 {
		s += fmt.Sprintf(", %d inferred from OVS's trace", inferred)
	}
	return s
}

// plural is n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// trueOrEmpty is "true" for a set flag and "" (left out by kv) otherwise.
func trueOrEmpty(b bool) string {
	if b {
		return "true"
	}
	return ""
}

// detailFields are the observation fields that say where the packet went.
func detailFields(o report.Observation) []string {
	return []string{
		"pod", o.Pod, "translatedDstIP", o.TranslatedDstIP, "translatedSrcIP", o.TranslatedSrcIP,
		"tunnelDstIP", o.TunnelDstIP, "networkPolicy", o.NetworkPolicy, "networkPolicyRule", o.NetworkPolicyRule,
		"egress", o.Egress, "egressIP", o.EgressIP, "egressNode", o.EgressNode,
	}
}

func tableRef(h outcome.Hop) string {
	if h.TableName == "" {
		return strconv.Itoa(h.TableID)
	}
	return fmt.Sprintf("%s(%d)", h.TableName, h.TableID)
}

// kv joins an event word and key=value pairs, leaving out empty values.
func kv(event string, pairs ...string) string {
	var b strings.Builder
	b.WriteString(event)
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			continue
		}
		b.WriteString(" ")
		b.WriteString(pairs[i])
		b.WriteString("=")
		b.WriteString(quoteIfNeeded(pairs[i+1]))
	}
	return b.String()
}

// quoteIfNeeded returns s as is when it is one printable word, else quoted,
// so that a value parses back as one key=value token.
func quoteIfNeeded(s string) string { return termsafe.Escape(s, termsafe.Word) }

// Safe escapes a string from the cluster (a node or object name, a warning)
// that a command prints outside a rendered trace, so that a crafted name
// cannot send control sequences to the terminal; an escaped name is
// printed quoted, as one.
func Safe(s string) string { return termsafe.Escape(s, termsafe.Name) }

// SafeText escapes text from the cluster that a command prints as a
// sentence of its own (a matrix cell's explanation): control characters
// are escaped, the words and spaces stay.
func SafeText(s string) string { return termsafe.Escape(s, termsafe.Text) }

func sub(t, base time.Time) time.Duration {
	if base.IsZero() || t.Before(base) {
		return 0
	}
	return t.Sub(base)
}

// fmtDur prints a duration with a precision that suits it: microseconds
// matter for hops within a node, seconds for helper start-up.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		// ASCII "ms" with three decimals rather than "µs", so plain output
		// stays 7-bit and needs no quoting.
		return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}
