package view

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/termsafe"
)

// Live draws the whole trace as a frame: the path node by node, one row per
// hop, a spinner saying what is awaited, and the verdict banner at the end.
// Frames are pure functions of the model, the width, the time and the
// spinner step, so tests can pin every one of them.
type Live struct {
	Width int
	// Height is the number of rows the frame may use (0: no limit). A
	// frame taller than the terminal would scroll, and Screen could no
	// longer redraw it in place; runs of plain forwarding hops are then
	// folded into one row each.
	Height  int
	Explain bool
	styles  styles
}

type styles struct {
	r                                          *lipgloss.Renderer
	title, dim, node, comp, ok, bad, warn, box lipgloss.Style
}

// NewLive returns a live renderer for a terminal of width columns with the
// given colour profile (termenv.Ascii for no colour).
func NewLive(width, height int, profile termenv.Profile, explain bool) *Live {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(profile)
	r.SetHasDarkBackground(true)
	s := styles{
		r:     r,
		title: r.NewStyle().Bold(true),
		dim:   r.NewStyle().Foreground(lipgloss.Color("245")),
		node:  r.NewStyle().Bold(true).Foreground(lipgloss.Color("39")),
		comp:  r.NewStyle().Foreground(lipgloss.Color("111")),
		ok:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("42")),
		bad:   r.NewStyle().Bold(true).Foreground(lipgloss.Color("203")),
		warn:  r.NewStyle().Bold(true).Foreground(lipgloss.Color("214")),
		box:   r.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1),
	}
	if width < 40 {
		width = 40
	}
	return &Live{Width: width, Height: height, Explain: explain, styles: s}
}

// inferredMark follows a hop the packet was not seen at, only predicted by
// OVS's trace of it.
const inferredMark = "(inferred)"

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Frame renders the model as it stands at now; step picks the spinner glyph.
func (l *Live) Frame(m *outcome.Model, now time.Time, step int) string {
	s := l.styles
	var lines []string
	t := m.Trace
	lines = append(lines, s.title.Render("traceflow ")+esc(t.Source)+" → "+esc(t.Destination)+"  "+esc(t.Packet))
	if t.Engine != "" {
		lines = append(lines, s.dim.Render(fmt.Sprintf("engine %s (%s) · tag %s · %s", esc(t.Engine), esc(t.EngineReason), dscp.Name(t.Tag), esc(t.Name))))
	}
	for _, w := range m.Warnings {
		where := ""
		if w.Node != "" {
			where = esc(w.Node) + ": "
		}
		lines = append(lines, s.warn.Render("! ")+where+esc(w.Message))
	}
	lines = append(lines, "")
	path := l.path(m, false)
	var tail string
	if m.Finished == nil {
		tail = s.warn.Render(spinner[step%len(spinner)]) + " " + waitingFor(m) + s.dim.Render(" "+fmtDur(sub(now, m.Started)))
	} else {
		tail = l.banner(m)
	}
	if l.Height > 0 && len(lines)+len(path)+1+strings.Count(tail, "\n")+1 > l.Height {
		path = l.path(m, true)
	}
	lines = append(lines, path...)
	lines = append(lines, "", tail)
	// Split again (the banner spans lines) and cut every line to the width,
	// so nothing wraps and Screen can redraw in place.
	rows := strings.Split(strings.Join(lines, "\n"), "\n")
	for i, row := range rows {
		rows[i] = ansi.Truncate(row, l.Width, "…")
	}
	return strings.Join(rows, "\n") + "\n"
}

// path renders the nodes and their hops; fold folds every run of three or
// more plain forwarding hops (no detail worth a row) into one row.
func (l *Live) path(m *outcome.Model, fold bool) []string {
	s := l.styles
	var lines []string
	for i, n := range m.Nodes {
		role := strings.ToLower(string(n.Role))
		lines = append(lines, s.node.Render("● "+esc(n.Name))+s.dim.Render(" "+role+nodeState(n)))
		hops := n.Hops
		if !l.Explain {
			hops = m.NodeSummary(n) // Antrea's words; --explain shows every table
		}
		for j := 0; j < len(hops); {
			k := j
			for fold && k < len(hops) && plain(hops[k].Observation) {
				k++
			}
			if k-j >= 3 {
				var tables []string
				inferred := ""
				guessed := 0
				for _, h := range hops[j:k] {
					tables = append(tables, esc(tableLabel(h.Hop)))
					if h.Inferred() {
						guessed++
					}
				}
				if guessed > 0 {
					inferred = fmt.Sprintf(" (%d inferred)", guessed)
				}
				lines = append(lines, s.dim.Render(fmt.Sprintf("│  %d hops forwarded%s: %s", k-j, inferred, strings.Join(tables, " › "))))
				j = k
				continue
			}
			lines = append(lines, l.hopLines(m, hops[j])...)
			j++
		}
		if i < len(m.Nodes)-1 {
			lines = append(lines, s.dim.Render("│"))
		}
	}
	return lines
}

// plain reports whether a hop says nothing beyond "forwarded".
func plain(o report.Observation) bool {
	return o.Action.Normalize() == report.ActionForwarded && details(o) == ""
}

func tableLabel(h outcome.Hop) string {
	if h.Observation.ComponentInfo != "" {
		return h.Observation.ComponentInfo
	}
	if h.TableName != "" {
		return h.TableName
	}
	return fmt.Sprint(h.TableID)
}

func nodeState(n *outcome.NodeState) string {
	switch {
	case n.Waiting != "":
		return " · " + esc(n.Waiting)
	case n.Ready && len(n.Hops) == 0:
		return " · ready"
	}
	return ""
}

func (l *Live) hopLines(m *outcome.Model, h outcome.TimedHop) []string {
	s := l.styles
	o := h.Observation
	act := string(o.Action.Normalize())
	actStyle := s.ok
	switch o.Action.Normalize() {
	case report.ActionDropped, report.ActionRejected:
		actStyle = s.bad
	case report.ActionForwarded, report.ActionReceived:
		actStyle = s.dim
	}
	where := o.ComponentInfo
	if where == "" {
		where = h.TableName
	}
	row := fmt.Sprintf("│  %-13s %s %s", esc(string(o.Component)), actStyle.Render(fmt.Sprintf("%-10s", act)), esc(where))
	if h.Inferred() {
		// Not seen, only predicted: said on the row itself, so that a
		// screenshot of the frame cannot pass a prediction off as a sighting.
		row += s.warn.Render(" " + inferredMark)
	}
	since := s.dim.Render("  +" + fmtDur(m.Since(h.At)))
	out := []string{row + since}
	// Details go on the hop's row when they fit, else on a line of their
	// own, so a long policy name is never cut.
	if d := details(o); d != "" {
		if oneLine := row + "  " + d + since; ansi.StringWidth(oneLine) <= l.Width {
			out[0] = oneLine
		} else {
			out = append(out, "│    "+d)
		}
	}
	if l.Explain || o.Action.Normalize() == report.ActionDropped || o.Action.Normalize() == report.ActionRejected {
		out = append(out, s.dim.Render(fmt.Sprintf("│    table %s  %s", esc(tableRef(h.Hop)), esc(h.Flow))))
	}
	return out
}

// details are the observation fields worth a glance, as "key value".
func details(o report.Observation) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+esc(v))
		}
	}
	add("pod", o.Pod)
	add("→", o.TranslatedDstIP)
	add("src→", o.TranslatedSrcIP)
	add("tunnel", o.TunnelDstIP)
	add("policy", o.NetworkPolicy)
	add("rule", o.NetworkPolicyRule)
	add("egress", o.Egress)
	add("egressIP", o.EgressIP)
	return strings.Join(parts, "  ")
}

// waitingFor says what the trace waits for now, in the user's words.
func waitingFor(m *outcome.Model) string {
	for _, n := range m.Nodes {
		if !n.Ready {
			reason := n.Waiting
			if reason == "" {
				reason = "starting"
			}
			return "starting helper on " + esc(n.Name) + ": " + esc(reason)
		}
	}
	if m.InjectedAt.IsZero() {
		if len(m.Nodes) == 0 {
			return "starting helpers"
		}
		return "injecting the probe"
	}
	return "waiting for the packet"
}

func (l *Live) banner(m *outcome.Model) string {
	s := l.styles
	f := m.Finished
	var style lipgloss.Style
	mark := "✔"
	switch {
	case outcome.ReachedDestination(f.Verdict, m.Trace.DestinationKind):
		style = s.ok
	case f.Verdict == outcome.ForwardedOutOfNetwork:
		// Out of the pod network, but the destination is a pod: the packet
		// went somewhere, not where it was sent.
		style, mark = s.warn, "!"
	case f.Verdict == outcome.Incomplete:
		style, mark = s.warn, "…"
	default:
		style, mark = s.bad, "✘"
	}
	text := style.Render(mark + " " + strings.ToUpper(string(f.Verdict)))
	if f.Predicted() {
		text += " " + s.warn.Render(predictedNote)
	}
	if !m.InjectedAt.IsZero() {
		text += s.dim.Render(" in " + fmtDur(sub(f.Time, m.InjectedAt)) + " after injection")
	}
	if f.Reason != "" {
		text += "\n" + esc(f.Reason)
	}
	if r := f.Reply; r != nil {
		rs, rmark := s.ok, "↩"
		if r.Fate != outcome.Answered {
			rs, rmark = s.bad, "✘"
		}
		text += "\n" + rs.Render(rmark+" ANSWER "+strings.ToUpper(string(r.Fate))) + "\n" + esc(r.Reason)
	}
	return s.box.BorderForeground(style.GetForeground()).Width(min(l.Width-2, 100)).Render(text)
}

// esc makes a string from the cluster safe for a terminal: control
// characters, escape sequences included, are shown escaped, not
// interpreted, and without quotes, as the text of a box is no token.
func esc(s string) string { return termsafe.Escape(s, termsafe.Text) }
