package check

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/junit"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// The report groups the traces by file in the order the files first come,
// counts each suite's time from the run's start to its last trace's end,
// and tells a missed expectation (a failure) from a trace that did not
// complete (an error); the path text is the caller's renderer's.
func TestJUnitReport(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	traces := []Trace{
		{File: "a.yaml", Name: "passes"},
		{File: "b.yaml", Name: "misses"},
		{File: "a.yaml", Name: "times out"},
	}
	model := &outcome.Model{}
	results := []Result{
		{Ended: outcome.Ended{Verdict: outcome.Delivered}, Started: at(0), Done: at(2)},
		{Ended: outcome.Ended{Verdict: outcome.Dropped}, Code: exitcode.Verdict, Err: errors.New("expected Delivered"),
			Model: model, Started: at(1), Done: at(4)},
		{Ended: outcome.Ended{Verdict: outcome.Incomplete}, Code: exitcode.Timeout, Err: errors.New("no answer"),
			Started: at(2), Done: at(7)},
	}
	j := JUnit{Name: "kubectl traceflow check", Started: start, PathText: func(m *outcome.Model) string {
		if m != model {
			t.Errorf("PathText got another model")
		}
		return "the path"
	}}
	want := junit.Report{Name: "kubectl traceflow check", Suites: []junit.Suite{
		{Name: "a.yaml", Timestamp: start, Time: 7 * time.Second, Cases: []junit.Case{
			{Name: "passes", Classname: "a.yaml", Time: 2 * time.Second},
			{Name: "times out", Classname: "a.yaml", Time: 5 * time.Second,
				Error: &junit.Problem{Type: "Incomplete", Message: "no answer"}},
		}},
		{Name: "b.yaml", Timestamp: start, Time: 4 * time.Second, Cases: []junit.Case{
			{Name: "misses", Classname: "b.yaml", Time: 3 * time.Second, Output: "the path",
				Failure: &junit.Problem{Type: "Dropped", Message: "expected Delivered", Text: "the path"}},
		}},
	}}
	if diff := cmp.Diff(want, j.Report(traces, results)); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}
