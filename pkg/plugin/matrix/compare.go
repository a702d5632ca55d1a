package matrix

import (
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
)

// Known checks that every pod the file names is one of pods, the run's:
// the first that is not is an error naming its line and field
// (cells[i].from or cells[i].to), so that a renamed pod reads as a stale
// file rather than as a row of cells that were never traced.
func (e *Expected) Known(pods map[string]bool) error {
	for i, c := range e.Order {
		at := e.podsAt[c]
		for j, name := range []string{c.From, c.To} {
			if pods[name] {
				continue
			}
			pos := at[j]
			if pos.Line == 0 {
				pos = e.Cells[c].At // an Expected not read from a file
			}
			field := fmt.Sprintf("cells[%d].%s", i, [2]string{"from", "to"}[j])
			return check.Errorf(pos, field, "no pod %s among this run's (the Ready pods of the namespace, or of -l): it was deleted or renamed, is not Ready, or the file is another namespace's; update the expected matrix, or wait for the pod", name)
		}
	}
	return nil
}

// InNamespace checks that the file is for namespace ns, the run's: a file
// that names none is for any namespace.
func (e *Expected) InNamespace(ns string) error {
	if e.Namespace == "" || e.Namespace == ns {
		return nil
	}
	at := e.namespaceAt
	if at.Line == 0 {
		at = check.Pos{File: e.File, Line: 1}
	}
	return check.Errorf(at, "namespace", "the file is for namespace %s, the run is in %s: run with -n %s, or use that namespace's file", e.Namespace, ns, e.Namespace)
}

// WriteExpected writes a file ParseExpected reads back to the same cells
// and states: the cells of g in grid order, one a line, in flow style.
// Cells not traced to an end (Pending, Running) are left out, since no
// file can expect them.
func WriteExpected(w io.Writer, namespace string, g Grid, states map[Cell]State) error {
	var b strings.Builder
	b.WriteString("apiVersion: " + APIVersion + "\nkind: " + Kind + "\n")
	if namespace != "" {
		b.WriteString("namespace: " + plain(namespace) + "\n")
	}
	var lines []string
	for _, c := range g.Cells() {
		s := states[c]
		if !s.final() {
			continue
		}
		lines = append(lines, fmt.Sprintf("- {from: %s, to: %s, port: %s, expect: %s}\n", plain(c.From), plain(c.To), c.Port, s))
	}
	if len(lines) == 0 {
		b.WriteString("cells: []\n")
	} else {
		b.WriteString("cells:\n" + strings.Join(lines, ""))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plain writes a name as a YAML scalar that reads back as the same string:
// most pod names go as they are, but some (null, true, 123) would read as
// another type, and the YAML library knows which to quote.
func plain(s string) string {
	out, err := yaml.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%q", s) // a string always marshals; JSON quoting is YAML too
	}
	return strings.TrimSuffix(string(out), "\n")
}

// Mismatch is a cell whose state is not the one the file expects.
type Mismatch struct {
	Cell Cell
	// Want is the file's state, Got the run's: Pending for a cell the file
	// lists and the run did not trace.
	Want, Got State
	// Listed is false for a cell the run traced and the file does not
	// list; Want is then Pending.
	Listed bool
	// At is where the file lists the cell, if it does.
	At check.Pos
}

// String says what differs and where the file says otherwise, e.g.
// "client-a → web-1 tcp/80: expected dropped (matrix.yaml:7), got delivered".
func (m Mismatch) String() string {
	switch {
	case !m.Listed:
		return fmt.Sprintf("%s: not in the expected matrix, got %s", m.Cell, m.Got)
	case !m.Got.final():
		return fmt.Sprintf("%s: expected %s (%s), got %s: the cell was not traced to an end in this run", m.Cell, m.Want, m.At, m.Got)
	}
	return fmt.Sprintf("%s: expected %s (%s), got %s", m.Cell, m.Want, m.At, m.Got)
}

// Compare returns the cells whose state differs from the file's: the
// grid's in grid order, then the cells the file lists outside the grid in
// the file's order. A cell traced but not listed is a mismatch, since a
// new pod or port is a change CI should see; a cell neither listed nor
// traced (a run cut short) is not.
func Compare(e *Expected, g Grid, got map[Cell]State) []Mismatch {
	var out []Mismatch
	inGrid := map[Cell]bool{}
	for _, c := range g.Cells() {
		inGrid[c] = true
		s := got[c]
		want, listed := e.Cells[c]
		switch {
		case !listed && s.final():
			out = append(out, Mismatch{Cell: c, Got: s})
		case listed && want.State != s:
			out = append(out, Mismatch{Cell: c, Want: want.State, Got: s, Listed: true, At: want.At})
		}
	}
	for _, c := range e.Order {
		want := e.Cells[c]
		if s := got[c]; !inGrid[c] && s != want.State {
			out = append(out, Mismatch{Cell: c, Want: want.State, Got: s, Listed: true, At: want.At})
		}
	}
	return out
}
