package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/matrix"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// matrixReporter turns the runner's progress into the grid: it keeps every
// cell's state, redraws the grid on a terminal as cells end, and writes
// the chosen output at the end.
type matrixReporter struct {
	o         *MatrixOptions
	namespace string
	grid      matrix.Grid
	traces    []check.Trace
	cells     []matrix.Cell
	mu        sync.Mutex
	states    map[matrix.Cell]matrix.State
	results   map[matrix.Cell]*check.Result
	screen    *view.Screen
	err       error
	// started is when the run started; first and last when its first and
	// last cell ended, ended how many have: what the summary's per-cell
	// cost is made of.
	started, first, last time.Time
	ended                int
	// requests counts the run's API requests (nil where unknown), from
	// requests0.
	requests  func() int64
	requests0 int64
}

func newMatrixReporter(o *MatrixOptions, clients *Clients, g matrix.Grid, traces []check.Trace, cells []matrix.Cell) *matrixReporter {
	r := &matrixReporter{o: o, namespace: clients.Namespace, grid: g, traces: traces, cells: cells, started: time.Now(), requests: clients.Requests,
		states: map[matrix.Cell]matrix.State{}, results: map[matrix.Cell]*check.Result{}}
	if r.requests != nil {
		r.requests0 = r.requests()
	}
	if o.format == outputLive {
		r.screen = &view.Screen{W: o.Out}
		r.draw()
	}
	return r
}

func (r *matrixReporter) keep(err error) {
	if r.err == nil {
		r.err = err
	}
}

// draw redraws the grid; the caller holds mu (or owns r alone).
func (r *matrixReporter) draw() {
	var b bytes.Buffer
	r.keep(r.grid.Render(&b, r.states))
	r.keep(r.screen.Draw(b.String()))
}

// progress hears a cell start (res nil) or end.
func (r *matrixReporter) progress(i int, res *check.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cell := r.cells[i]
	if res == nil {
		r.states[cell] = matrix.Running
	} else {
		r.states[cell] = matrix.StateOf(res.Verdict, res.Reply)
		r.results[cell] = res
		if r.first.IsZero() {
			r.first = res.Done
		}
		if res.Done.After(r.last) {
			r.last = res.Done
		}
		r.ended++
		if r.o.format == outputJSON {
			r.keep(writeCellJSON(r.o.Out, cell, r.states[cell], r.traces[i], *res))
		}
	}
	if r.screen != nil {
		r.draw()
	}
}

// mismatches compares the run with the expected file (none without one).
func (r *matrixReporter) mismatches(e *matrix.Expected) []matrix.Mismatch {
	if e == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return matrix.Compare(e, r.grid, r.states)
}

// close ends the output: the last grid, every cell that is not answered
// explained, the differences from the expected file, and a summary (on
// stderr where stdout is for machines: -o json, -o expected).
func (r *matrixReporter) close(mismatches []matrix.Mismatch, took time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, summary := r.o.Out, r.o.Out
	switch r.o.format {
	case outputLive:
		r.draw()
		r.keep(r.screen.Close())
	case outputPlain:
		r.keep(r.grid.Render(out, r.states))
	case outputExpected:
		r.keep(matrix.WriteExpected(out, r.namespace, r.grid, r.states))
		out, summary = r.o.ErrOut, r.o.ErrOut
	case outputJSON:
		out, summary = r.o.ErrOut, r.o.ErrOut
	}
	if r.o.format != outputJSON {
		r.explain(out)
	}
	for _, m := range mismatches {
		_, _ = fmt.Fprintf(out, "DIFF %s%s\n", view.SafeText(m.String()), view.SafeText(r.because(m.Cell)))
	}
	_, _ = fmt.Fprintln(summary, r.summary(len(mismatches), took))
	return r.err
}

// summary is the run in one line: the cells by state, and what a cell
// cost once the first had ended (the helpers' start is in the first), in
// time and in API requests.
func (r *matrixReporter) summary(differ int, took time.Duration) string {
	answered := 0
	for _, s := range r.states {
		if s == matrix.Delivered {
			answered++
		}
	}
	s := fmt.Sprintf("%d cells in %s: %d ✓, %d not", len(r.cells), took.Round(10*time.Millisecond), answered, len(r.cells)-answered)
	if r.o.expected != nil {
		s += fmt.Sprintf("; %d differ from %s", differ, r.o.expectFile)
	}
	if r.ended > 1 {
		s += fmt.Sprintf("; the first cell after %s, then %s a cell", r.first.Sub(r.started).Round(10*time.Millisecond),
			(r.last.Sub(r.first) / time.Duration(r.ended-1)).Round(time.Millisecond))
	}
	if r.requests != nil {
		n := r.requests() - r.requests0
		s += fmt.Sprintf("; %d API requests (%.1f a cell)", n, float64(n)/float64(max(len(r.cells), 1)))
	}
	return s
}

// explain writes one line for every cell that is not ✓: where its packet
// (or its answer) ended, with the node, table, flow and policy rule. Cells
// that could not run for the same reason (a helper image no node can
// pull) share one line.
func (r *matrixReporter) explain(w io.Writer) {
	var order []string
	same := map[string][]string{}
	for i, cell := range r.cells {
		st, res := r.states[cell], r.results[cell]
		if st == matrix.Delivered || res == nil {
			continue
		}
		msg := res.Message(r.traces[i])
		if res.Verdict != outcome.Failed && res.Verdict != outcome.Incomplete {
			_, _ = fmt.Fprintf(w, "%s %s: %s\n", st.Symbol(), view.SafeText(cell.String()), view.SafeText(msg))
			continue
		}
		if _, ok := same[msg]; !ok {
			order = append(order, msg)
		}
		same[msg] = append(same[msg], cell.String())
	}
	for _, msg := range order {
		_, _ = fmt.Fprintf(w, "%s %s: %s\n", matrix.Incomplete.Symbol(), view.SafeText(fewNames(same[msg])), view.SafeText(msg))
	}
}

// because is the hop that decided a differing cell, if it ran.
func (r *matrixReporter) because(cell matrix.Cell) string {
	res := r.results[cell]
	if res == nil {
		return ""
	}
	for i, c := range r.cells {
		if c == cell {
			return ": " + res.Message(r.traces[i])
		}
	}
	return ""
}

// cellJSON is -o json: one object per cell, written as it ends: the
// cell, its state, and the trace's result as check -o json gives it.
type cellJSON struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Port  string `json:"port"`
	State string `json:"state"`
	caseJSON
}

func writeCellJSON(w io.Writer, cell matrix.Cell, st matrix.State, t check.Trace, res check.Result) error {
	b, err := json.Marshal(cellJSON{From: cell.From, To: cell.To, Port: cell.Port.String(), State: st.String(), caseJSON: caseJSONOf(t, res)})
	if err != nil {
		return fmt.Errorf("encode the cell %s as JSON: %w", cell, err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
