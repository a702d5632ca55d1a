package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/muesli/termenv"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tracerun"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// suiteReporter turns the runner's progress into the chosen output.
type suiteReporter struct {
	o      *CheckOptions
	traces []check.Trace
	mu     sync.Mutex
	rows   []view.SuiteRow
	live   *view.SuiteLive
	screen *view.Screen
	stop   chan struct{}
	done   sync.WaitGroup
	step   int
	err    error
}

func newSuiteReporter(o *CheckOptions, traces []check.Trace) *suiteReporter {
	r := &suiteReporter{o: o, traces: traces, rows: make([]view.SuiteRow, len(traces)), stop: make(chan struct{})}
	for i, t := range traces {
		r.rows[i].Name = t.Name
	}
	if o.format == outputLive {
		profile := termenv.Ascii
		if o.useColor {
			profile = termenv.ANSI256
		}
		w, _ := terminalSize(o.Out)
		r.live = view.NewSuiteLive(w, profile)
		r.screen = &view.Screen{W: o.Out}
		r.done.Add(1)
		go r.tick()
	}
	return r
}

func (r *suiteReporter) keep(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *suiteReporter) tick() {
	defer r.done.Done()
	t := time.NewTicker(spinnerEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			r.step++
			r.keep(r.screen.Draw(r.live.Frame(r.rows, time.Now(), r.step)))
			r.mu.Unlock()
		}
	}
}

// progress hears a trace start (res nil) or end.
func (r *suiteReporter) progress(i int, res *check.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	row := &r.rows[i]
	if res == nil {
		row.Running, row.Started = true, time.Now()
	} else {
		row.Running, row.Done = false, true
		row.Passed, row.Verdict, row.Code = res.Passed(), string(res.Verdict), int(res.Code)
		row.Where, row.Elapsed = res.Message(r.traces[i]), res.Done.Sub(res.Started)
		if res.Reply != nil {
			row.Reply = string(res.Reply.Fate)
		}
	}
	switch {
	case r.live != nil:
		r.keep(r.screen.Draw(r.live.Frame(r.rows, time.Now(), r.step)))
	case res == nil:
	case r.o.format == outputJSON:
		r.keep(writeCaseJSON(r.o.Out, r.traces[i], *res))
	default:
		r.keep(view.SuitePlain{W: r.o.Out}.Write(*row))
	}
}

// close draws the last frame, gives the terminal back and prints the
// summary line (to stderr under -o json, whose stdout is for machines).
func (r *suiteReporter) close(results []check.Result, code exitcode.Code, took time.Duration) error {
	close(r.stop)
	r.done.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live != nil {
		r.keep(r.screen.Draw(r.live.Frame(r.rows, time.Now(), r.step)))
		r.keep(r.screen.Close())
	}
	to := r.o.Out
	if r.o.format == outputJSON {
		to = r.o.ErrOut
	}
	_, _ = fmt.Fprintln(to, view.SuiteSummary(r.rows, int(code), took)) // the exit code carries the result if this fails
	return r.err
}

// caseJSON is -o json: one object per trace, written as it ends. For a
// round trip, Reply is the answer's fate (once its probe was delivered) and
// Direction the way that decided the result (forward or reply), whose hop
// Node, Table and Flow name.
type caseJSON struct {
	Case          string  `json:"case"`
	File          string  `json:"file"`
	Line          int     `json:"line"`
	Source        string  `json:"source"`
	Destination   string  `json:"destination"`
	Packet        string  `json:"packet,omitempty"`
	Expect        string  `json:"expect"`
	Verdict       string  `json:"verdict"`
	Reply         string  `json:"reply,omitempty"`
	Direction     string  `json:"direction,omitempty"`
	Passed        bool    `json:"passed"`
	ExitCode      int     `json:"exitCode"`
	Message       string  `json:"message,omitempty"`
	Node          string  `json:"node,omitempty"`
	Table         string  `json:"table,omitempty"`
	Flow          string  `json:"flow,omitempty"`
	NetworkPolicy string  `json:"networkPolicy,omitempty"`
	Rule          string  `json:"networkPolicyRule,omitempty"`
	Inferred      bool    `json:"inferred,omitempty"`
	Seconds       float64 `json:"seconds"`
	// Trace and Tag name the trace's record, helper pods and tag claim.
	Trace string `json:"trace,omitempty"`
	Tag   uint8  `json:"tag,omitempty"`
}

func writeCaseJSON(w io.Writer, t check.Trace, r check.Result) error {
	b, err := json.Marshal(caseJSONOf(t, r))
	if err != nil {
		return fmt.Errorf("encode the result of %q as JSON: %w", t.Name, err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// caseJSONOf is the -o json object of a trace and its result.
func caseJSONOf(t check.Trace, r check.Result) caseJSON {
	c := caseJSON{Case: t.Name, File: t.File, Line: t.Case.At.Line,
		Source: tracerun.EndpointName(t.Result.Source), Destination: tracerun.EndpointName(t.Result.Destination),
		Expect: string(t.Expect), Verdict: string(r.Verdict), Passed: r.Passed(), ExitCode: int(r.Code),
		Message: r.Message(t), Seconds: r.Done.Sub(r.Started).Seconds()}
	if r.Model != nil {
		c.Packet, c.Trace, c.Tag = r.Model.Trace.Packet, r.Model.Trace.Name, r.Model.Trace.Tag
	}
	if r.Reply != nil {
		c.Reply = string(r.Reply.Fate)
	}
	c.Direction = r.Direction(t)
	if h := r.DecidingHop(t); h != nil {
		c.Node, c.Table, c.Flow, c.Inferred = h.Node, tableName(*h), h.Flow, h.Inferred()
		c.NetworkPolicy, c.Rule = h.Observation.NetworkPolicy, h.Observation.NetworkPolicyRule
	}
	return c
}

func tableName(h outcome.Hop) string {
	if h.TableName != "" {
		return fmt.Sprintf("%s(%d)", h.TableName, h.TableID)
	}
	return fmt.Sprint(h.TableID)
}
