package view

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

const testWidth = 80

// TestLiveGolden pins every intermediate frame and the final one, without
// colour, at a fixed width and clock.
func TestLiveGolden(t *testing.T) {
	for name, updates := range scenarios {
		t.Run(name, func(t *testing.T) {
			l := NewLive(testWidth, termenv.Ascii, false)
			var buf bytes.Buffer
			step := 0
			build(updates, func(m *Model, u Update) {
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
	l := NewLive(testWidth, termenv.ANSI256, true)
	m := build(scenarios["networkpolicy-drop"], nil)
	f := l.Frame(m, m.Finished.Time, 0)
	if !strings.Contains(f, "\x1b[") {
		t.Fatal("ANSI256 frame has no colour")
	}
	golden(t, "live-networkpolicy-drop-ansi256.txt", []byte(f))
}

func TestLiveNoColourHasNoEscapes(t *testing.T) {
	for name, updates := range scenarios {
		l := NewLive(testWidth, termenv.Ascii, true)
		m := build(updates, nil)
		if f := l.Frame(m, m.Finished.Time, 3); strings.Contains(f, "\x1b") {
			t.Errorf("%s: colourless frame contains an escape: %q", name, f)
		}
	}
}

func TestLiveNarrowTerminalTruncates(t *testing.T) {
	l := NewLive(40, termenv.ANSI256, true)
	m := build(scenarios["inter-node-delivered"], nil)
	for _, line := range strings.Split(strings.TrimSuffix(l.Frame(m, m.Finished.Time, 0), "\n"), "\n") {
		if w := ansi.StringWidth(line); w > 40 {
			t.Errorf("line of width %d in a 40-column terminal: %q", w, line)
		}
	}
}

func TestLiveEscapesClusterStrings(t *testing.T) {
	l := NewLive(testWidth, termenv.Ascii, false)
	m := &Model{}
	m.Apply(HelperWaiting{At: at(1), Node: "n\x1b[2J", Reason: "x"})
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
