package view

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

const testWidth = 80

// TestLiveGolden pins every intermediate frame and the final one, without
// colour, at a fixed width and clock.
func TestLiveGolden(t *testing.T) {
	for name, updates := range scenarios {
		t.Run(name, func(t *testing.T) {
			l := NewLive(testWidth, 0, termenv.Ascii, false)
			var buf bytes.Buffer
			step := 0
			build(updates, func(m *outcome.Model, u outcome.Update) {
				f := l.Frame(m, u.When(), step)
				for _, line := range strings.Split(strings.TrimSuffix(f, "\n"), "\n") {
					if w := ansi.StringWidth(line); w > testWidth {
						t.Errorf("frame line wider than %d (%d): %q", testWidth, w, line)
					}
				}
				fmt.Fprintf(&buf, "=== after %T (+%s)\n%s", u, fmtDur(sub(u.When(), t0)), f)
				step++
			})
			golden(t, "live-"+name+".txt", buf.Bytes())
		})
	}
}

func TestLiveColourProfileGolden(t *testing.T) {
	l := NewLive(testWidth, 0, termenv.ANSI256, true)
	m := build(scenarios["networkpolicy-drop"], nil)
	f := l.Frame(m, m.Finished.Time, 0)
	if !strings.Contains(f, "\x1b[") {
		t.Fatal("ANSI256 frame has no colour")
	}
	golden(t, "live-networkpolicy-drop-ansi256.txt", []byte(f))
}

func TestLiveNoColourHasNoEscapes(t *testing.T) {
	for name, updates := range scenarios {
		l := NewLive(testWidth, 0, termenv.Ascii, true)
		m := build(updates, nil)
		if f := l.Frame(m, m.Finished.Time, 3); strings.Contains(f, "\x1b") {
			t.Errorf("%s: colourless frame contains an escape: %q", name, f)
		}
	}
}

func TestLiveNarrowTerminalTruncates(t *testing.T) {
	l := NewLive(40, 0, termenv.ANSI256, true)
	m := build(scenarios["inter-node-delivered"], nil)
	for _, line := range strings.Split(strings.TrimSuffix(l.Frame(m, m.Finished.Time, 0), "\n"), "\n") {
		if w := ansi.StringWidth(line); w > 40 {
			t.Errorf("line of width %d in a 40-column terminal: %q", w, line)
		}
	}
}

func TestLiveEscapesClusterStrings(t *testing.T) {
	l := NewLive(testWidth, 0, termenv.Ascii, false)
	m := &outcome.Model{}
	m.Apply(outcome.HelperWaiting{At: at(1), Node: "n\x1b[2J", Reason: "x"})
	if f := l.Frame(m, t0, 0); strings.Contains(f, "\x1b") {
		t.Fatalf("escape from a node name reached the terminal: %q", f)
	}
}

func TestScreenRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	s := &Screen{W: &buf}
	if err := s.Draw("a\nb\nc\n"); err != nil {
		t.Fatal(err)
	}
	first := buf.Len()
	if err := s.Draw("a\nb\n"); err != nil {
		t.Fatal(err)
	}
	second := buf.String()[first:]
	if !strings.HasPrefix(second, "\x1b[3A\r") {
		t.Errorf("second frame does not move up over the 3 lines of the first: %q", second)
	}
	if !strings.HasSuffix(second, "\x1b[J") {
		t.Errorf("second frame does not clear the rest of the longer first: %q", second)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(buf.String(), "\x1b[?25h") {
		t.Error("Close does not show the cursor again")
	}
}

// A frame taller than the terminal would scroll instead of redrawing in
// place: plain forwarding hops fold so that it fits.
func TestLiveFitsTheTerminalHeight(t *testing.T) {
	var updates []outcome.Update
	updates = append(updates, scenarios["inter-node-delivered"][:6]...)
	for i := range 30 {
		updates = append(updates, outcome.Observed{At: at(872 + float64(i)/10), Hop: hop(n1, report.RoleSender, i, fmt.Sprintf("T%d", i),
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: fmt.Sprintf("T%d", i), Action: report.ActionForwarded}, "")})
	}
	updates = append(updates, scenarios["inter-node-delivered"][6:]...)
	m := build(updates, nil)
	l := NewLive(testWidth, 20, termenv.Ascii, false)
	f := l.Frame(m, m.Finished.Time, 0)
	if n := strings.Count(f, "\n"); n > 20 {
		t.Fatalf("frame of %d rows for a 20-row terminal:\n%s", n, f)
	}
	if !strings.Contains(f, "31 hops forwarded: T0 › T1") || !strings.Contains(f, "tunnel 192.168.77.12") || !strings.Contains(f, "DELIVERED") {
		t.Errorf("folded frame lost what matters:\n%s", f)
	}
	golden(t, "live-folded.txt", []byte(f))
	if unfolded := NewLive(testWidth, 0, termenv.Ascii, false).Frame(m, m.Finished.Time, 0); strings.Contains(unfolded, "hops forwarded") {
		t.Error("folded without a height limit")
	}
}

// A hop that was only predicted says so in every format, and so does a
// verdict that rests on one; folding a run of hops keeps their count.
func TestInferredHopsAreMarked(t *testing.T) {
	m := build(scenarios["inferred-drop"], nil)
	f := NewLive(testWidth, 0, termenv.Ascii, false).Frame(m, m.Finished.Time, 0)
	if !strings.Contains(f, "IngressDefaultRule (inferred)") || !strings.Contains(f, "DROPPED (predicted by OVS's trace, not observed)") {
		t.Errorf("live frame does not mark the inferred hop and the predicted verdict:\n%s", f)
	}
	if s := Summary(m, outcome.ExpectDropped, false); !strings.Contains(s, "2 hops, 1 inferred from OVS's trace") || !strings.Contains(s, "(predicted by OVS's trace, not observed)") {
		t.Errorf("summary %q does not count the inferred hop or call the verdict predicted", s)
	}
	rec := Record(m, nil)
	if obs := rec.Status.Results[0].Observations; obs[0].Inferred || !obs[1].Inferred {
		t.Errorf("record observations %+v, want only the second inferred", obs)
	}

	var updates []outcome.Update
	updates = append(updates, scenarios["inferred-drop"][:3]...)
	for i := range 4 {
		o := report.Observation{Component: report.ComponentForwarding, ComponentInfo: fmt.Sprintf("T%d", i), Action: report.ActionForwarded, Inferred: i%2 == 0}
		updates = append(updates, outcome.Observed{At: at(701 + float64(i)/10), Hop: hop(n1, report.RoleSender, i, "", o, "")})
	}
	folded := NewLive(testWidth, 8, termenv.Ascii, false).Frame(build(updates, nil), t0, 0)
	if !strings.Contains(folded, "4 hops forwarded (2 inferred): T0") {
		t.Errorf("folded hops lost their inferred count:\n%s", folded)
	}
}
