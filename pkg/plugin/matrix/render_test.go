package matrix

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/goldenfile"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

var (
	tcp80   = Port{traceflow.TCP, 80}
	tcp8080 = Port{traceflow.TCP, 8080}
)

// small is a 3×3 grid on two ports whose states use every symbol.
func small() (Grid, map[Cell]State) {
	g := Grid{
		Sources:      []string{"client-a", "client-b", "web-1"},
		Destinations: []string{"web-1", "web-2", "client-a"},
		Ports:        []Port{tcp80, tcp8080},
	}
	s := map[Cell]State{}
	for _, r := range []struct {
		from, to     string
		at80, at8080 State
	}{
		{"client-a", "web-1", Delivered, Dropped}, {"client-a", "web-2", Delivered, Refused},
		{"client-b", "web-1", Dropped, Dropped}, {"client-b", "web-2", Incomplete, Running},
		{"client-b", "client-a", Delivered, Pending},
		{"web-1", "web-2", Delivered, Delivered}, {"web-1", "client-a", Refused, Refused},
	} {
		s[Cell{r.from, r.to, tcp80}], s[Cell{r.from, r.to, tcp8080}] = r.at80, r.at8080
	}
	return g, s
}

// large is a 10×20 grid on two ports, the size the layout is meant for,
// with names as a Deployment gives its pods.
func large() (Grid, map[Cell]State) {
	g := Grid{Ports: []Port{tcp80, tcp8080}}
	for i := range 10 {
		g.Sources = append(g.Sources, fmt.Sprintf("client-%d-7d9f8c6b5-x%dq2z", i, i))
	}
	for i := range 20 {
		g.Destinations = append(g.Destinations, fmt.Sprintf("web-%d-5f6d7c8b9-k%dp4w", i, i))
	}
	g.Destinations[3] = g.Sources[3] // a pod both sends and receives
	s := map[Cell]State{}
	for i, c := range g.Cells() {
		s[c] = [...]State{Delivered, Delivered, Dropped, Delivered, Refused, Delivered, Delivered, Incomplete}[i%8]
	}
	return g, s
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func() (Grid, map[Cell]State)
	}{
		{"render-3x3x2.golden", small},
		{"render-10x20x2.golden", large},
		{"render-none-traced.golden", func() (Grid, map[Cell]State) { g, _ := small(); return g, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, s := tc.build()
			var b bytes.Buffer
			if err := g.Render(&b, s); err != nil {
				t.Fatal(err)
			}
			for i, l := range strings.Split(b.String(), "\n") {
				if n := width(l); n > 100 {
					t.Errorf("line %d is %d columns wide, over 100: %q", i+1, n, l)
				}
				if strings.TrimRight(l, " ") != l {
					t.Errorf("line %d ends in spaces: %q", i+1, l)
				}
			}
			goldenfile.Check(t, tc.name, b.Bytes())
		})
	}
}

// Every row of the table is as wide as its header, counted in runes: the
// symbols are several bytes each.
func TestRenderAligns(t *testing.T) {
	g, s := large()
	var b bytes.Buffer
	if err := g.Render(&b, s); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	header := width(lines[1])
	for i, l := range lines[2 : 2+len(g.Sources)] {
		if width(l) != header {
			t.Errorf("row %d is %d columns, the header %d:\n%s\n%s", i, width(l), header, lines[1], l)
		}
	}
}

// A name that could drive the terminal is written escaped, wherever it is.
func TestRenderEscapesNames(t *testing.T) {
	evil := "x\x1b]0;pwned\x07"
	g := Grid{Sources: []string{evil}, Destinations: []string{"web\u202e"}, Ports: []Port{tcp80}}
	var b bytes.Buffer
	if err := g.Render(&b, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Errorf("control characters reached the output:\n%q", out)
	}
	for _, want := range []string{`"x\x1b]0;pwned\a"`, `"web\u202e"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRenderReturnsWriteErrors(t *testing.T) {
	g, s := small()
	if err := g.Render(failingWriter{}, s); err == nil || err.Error() != "disk full" {
		t.Errorf("Render = %v, want the writer's error", err)
	}
	if err := WriteExpected(failingWriter{}, "demo", g, s); err == nil || err.Error() != "disk full" {
		t.Errorf("WriteExpected = %v, want the writer's error", err)
	}
}

// With round trips, ✓ is an answer that came back: the legend says so.
func TestRenderLegendOfARoundTrip(t *testing.T) {
	g, states := small()
	for _, rt := range []bool{false, true} {
		g.RoundTrip = rt
		var b bytes.Buffer
		if err := g.Render(&b, states); err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "✓ delivered  ✗ dropped", true: "✓ answered  ✗ dropped"}[rt]
		if !strings.Contains(b.String(), want) {
			t.Errorf("round trip %v: no %q in the legend:\n%s", rt, want, b.String())
		}
	}
}
