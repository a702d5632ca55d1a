package matrix

import (
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/termsafe"
)

// Grid is the matrix's shape: rows are source pods, columns destination
// pods, and each cell holds one symbol per port.
type Grid struct {
	Sources, Destinations []string
	Ports                 []Port
	// RoundTrip says the cells followed their answers back: the legend
	// then says what ✓ means there, answered.
	RoundTrip bool
}

// Cells returns every cell in row-major order: for each source, each
// destination, each port. A pod is not its own destination: traffic to
// itself never reaches the switch, so there is nothing to trace.
func (g Grid) Cells() []Cell {
	var out []Cell
	for _, from := range g.Sources {
		for _, to := range g.Destinations {
			if from == to {
				continue
			}
			for _, p := range g.Ports {
				out = append(out, Cell{From: from, To: to, Port: p})
			}
		}
	}
	return out
}

// corner heads the column of source names.
const corner = `FROM \ TO`

// self is the mark, one per port, of a pod's own cell.
const self = "-"

// Render writes the grid for a reader: the ports in the order of each
// cell's symbols, a table whose columns are numbered destinations and
// whose rows are named sources, then which destination each number is,
// then what the symbols shown mean. Destinations are numbered rather than
// named across the top because twenty pod names do not fit a terminal's
// width, and numbers keep every column as narrow as its symbols. A cell
// missing from states is Pending. Names are escaped for the terminal;
// colour is the caller's.
func (g Grid) Render(w io.Writer, states map[Cell]State) error {
	var b strings.Builder
	ports := make([]string, len(g.Ports))
	for i, p := range g.Ports {
		ports[i] = p.String()
	}
	b.WriteString("ports: " + strings.Join(ports, " ") + "\n")

	sources := make([]string, len(g.Sources))
	nameWidth := width(corner)
	for i, s := range g.Sources {
		sources[i] = termsafe.Escape(s, termsafe.Name)
		nameWidth = max(nameWidth, width(sources[i]))
	}
	digits := len(strconv.Itoa(len(g.Destinations)))
	cellWidth := max(len(g.Ports), digits)

	// Two spaces after the names, one between cells: a row reads as a
	// name and then its cells.
	b.WriteString(padRight(corner, nameWidth+1))
	for i := range g.Destinations {
		b.WriteString(" " + padLeft(strconv.Itoa(i+1), cellWidth))
	}
	b.WriteString("\n")
	shown := map[string]bool{}
	for i, from := range g.Sources {
		b.WriteString(padRight(sources[i], nameWidth+1))
		for _, to := range g.Destinations {
			cell := g.cell(from, to, states, shown)
			b.WriteString(" " + padLeft(cell, cellWidth))
		}
		b.WriteString("\n")
	}

	if len(g.Destinations) > 0 {
		b.WriteString("\n")
	}
	for i, to := range g.Destinations {
		b.WriteString(padLeft(strconv.Itoa(i+1), digits) + "  " + termsafe.Escape(to, termsafe.Name) + "\n")
	}
	if key := legend(shown, g.RoundTrip); key != "" {
		b.WriteString("\n" + key + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell is one cell's symbols, one per port, and notes each symbol shown
// for the legend.
func (g Grid) cell(from, to string, states map[Cell]State, shown map[string]bool) string {
	var b strings.Builder
	for _, p := range g.Ports {
		sym := self
		if from != to {
			sym = states[Cell{From: from, To: to, Port: p}].Symbol()
		}
		shown[sym] = true
		b.WriteString(sym)
	}
	return b.String()
}

// legend says what each symbol shown means, in a fixed order; symbols not
// shown are left out, so that a finished run's grid does not explain
// pending and running.
func legend(shown map[string]bool, roundTrip bool) string {
	var parts []string
	for s := Delivered; s <= Incomplete; s++ {
		switch {
		case !shown[s.Symbol()]:
		case s == Delivered && roundTrip:
			parts = append(parts, s.Symbol()+" answered")
		default:
			parts = append(parts, s.Symbol()+" "+s.String())
		}
	}
	for _, s := range []State{Pending, Running} {
		if shown[s.Symbol()] {
			parts = append(parts, s.Symbol()+" "+s.String())
		}
	}
	if shown[self] {
		parts = append(parts, self+" same pod")
	}
	return strings.Join(parts, "  ")
}

// width is how many terminal columns s takes: one a rune, which holds for
// the symbols and for escaped pod names (DNS names, or Go-quoted escapes).
func width(s string) int { return utf8.RuneCountInString(s) }

func padRight(s string, n int) string { return s + strings.Repeat(" ", max(0, n-width(s))) }

func padLeft(s string, n int) string { return strings.Repeat(" ", max(0, n-width(s))) + s }
