package view

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// SuiteRow is one trace of a `kubectl traceflow check` run as its views
// show it.
type SuiteRow struct {
	Name string
	// Running and Done say where the trace is; neither means waiting for a
	// tag.
	Running, Done bool
	Passed        bool
	Verdict       string
	// Reply is the answer's fate (Answered, Refused, Lost, Unanswered), for
	// a round trip whose probe was delivered; "" otherwise.
	Reply string
	// Where says where the packet's path ended, or why the trace failed;
	// for a round trip, which way (forward or reply) and at which hop.
	Where   string
	Started time.Time
	Elapsed time.Duration
	Code    int
}

// SuiteLive draws a check run as a table that redraws in place: case,
// verdict, where, time.
type SuiteLive struct {
	Width  int
	styles styles
}

// NewSuiteLive returns a suite table for a terminal of width columns with
// the given colour profile (termenv.Ascii for no colour).
func NewSuiteLive(width int, profile termenv.Profile) *SuiteLive {
	l := NewLive(width, 0, profile, false)
	return &SuiteLive{Width: l.Width, styles: l.styles}
}

// Frame renders rows at now; step picks the spinner glyph.
func (l *SuiteLive) Frame(rows []SuiteRow, now time.Time, step int) string {
	s := l.styles
	nameW := 12
	for _, r := range rows {
		nameW = max(nameW, ansi.StringWidth(esc(r.Name)))
	}
	nameW = min(nameW, max(l.Width/2, 12))
	lines := []string{s.title.Render(fmt.Sprintf("   %-*s  %-21s  %7s  %s", nameW, "CASE", "VERDICT", "TIME", "WHERE"))}
	passed, failed, running := 0, 0, 0
	for _, r := range rows {
		mark, style, verdict := "·", s.dim, "waiting for a tag"
		elapsed := r.Elapsed
		switch {
		case r.Done && r.Passed:
			mark, style, verdict = "✔", s.ok, r.Verdict
			passed++
		case r.Done:
			mark, style, verdict = "✘", s.bad, r.Verdict
			failed++
		case r.Running:
			mark, style, verdict = spinner[step%len(spinner)], s.warn, "running"
			elapsed = sub(now, r.Started)
			running++
		}
		t := ""
		if r.Done || r.Running {
			t = fmtDur(elapsed)
		}
		name := ansi.Truncate(esc(r.Name), nameW, "…")
		lines = append(lines, fmt.Sprintf(" %s %s  %s  %7s  %s", style.Render(mark),
			name+strings.Repeat(" ", nameW-ansi.StringWidth(name)), style.Render(fmt.Sprintf("%-21s", verdict)), t, esc(r.Where)))
	}
	lines = append(lines, "", s.dim.Render(fmt.Sprintf("%d traces: %d passed, %d failed, %d running, %d waiting",
		len(rows), passed, failed, running, len(rows)-passed-failed-running)))
	for i, row := range lines {
		lines[i] = ansi.Truncate(row, l.Width, "…")
	}
	return strings.Join(lines, "\n") + "\n"
}

// SuitePlain writes one line per finished trace, for pipes and CI logs:
// PASS or FAIL, the case, then key=value fields (quoted where needed, so
// cluster strings cannot inject escape codes); reply= only for a round
// trip's answer.
type SuitePlain struct{ W io.Writer }

// Write renders a finished row.
func (p SuitePlain) Write(r SuiteRow) error {
	status := "PASS"
	if !r.Passed {
		status = "FAIL"
	}
	_, err := fmt.Fprintf(p.W, "%s %s\n", status, kv(quoteIfNeeded(r.Name), "verdict", r.Verdict, "reply", r.Reply, "time", fmtDur(r.Elapsed),
		"exit", fmt.Sprint(r.Code), "where", r.Where))
	return err
}

// SuiteSummary is the last line of a check run: how many traces passed and
// the exit code.
func SuiteSummary(rows []SuiteRow, code int, took time.Duration) string {
	passed := 0
	for _, r := range rows {
		if r.Done && r.Passed {
			passed++
		}
	}
	status := "PASS"
	if code != 0 {
		status = "FAIL"
	}
	return fmt.Sprintf("%s: %d of %d traces met their expectation in %s (exit %d)", status, passed, len(rows), fmtDur(took), code)
}

// PathText is a trace's path as plain lines, one per hop with its OVS
// table and flow, for reports (a JUnit failure's details).
func PathText(m *outcome.Model) string {
	var b strings.Builder
	p := Plain{Explain: true}
	for _, h := range m.AllHops() {
		b.WriteString(p.line(m, outcome.Observed{At: outcome.At{Time: h.At}, Hop: h.Hop}))
		b.WriteString("\n")
	}
	if f := m.Finished; f != nil {
		b.WriteString(p.line(m, *f))
		b.WriteString("\n")
	}
	return b.String()
}
