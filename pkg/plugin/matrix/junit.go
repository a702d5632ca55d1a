package matrix

import (
	"fmt"
	"os"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/junit"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// JUnit is a matrix run's report for CI (--junit): one testcase per cell,
// a failure where the cell differs from the expected file (naming the
// file's line, the state seen and the hop that decided it), an error where
// the cell did not complete, and a failure for each cell the file lists
// and the run did not trace.
type JUnit struct {
	// Name names the report; Started is when the run started.
	Name    string
	Started time.Time
	// PathText renders a trace's path, as the check report does.
	PathText func(*outcome.Model) string
}

// Report builds the report of the cells, their traces and results (in the
// same order) and the differences from the expected file.
func (j JUnit) Report(cells []Cell, traces []check.Trace, results []check.Result, mismatches []Mismatch) junit.Report {
	diff := map[Cell]Mismatch{}
	for _, m := range mismatches {
		diff[m.Cell] = m
	}
	suite := junit.Suite{Name: SuiteName, Timestamp: j.Started}
	for i, cell := range cells {
		res := results[i]
		c := junit.Case{Name: cell.String(), Classname: SuiteName, Time: res.Done.Sub(res.Started)}
		if res.Model != nil {
			c.Output = j.PathText(res.Model)
		}
		suite.Time = max(suite.Time, res.Done.Sub(j.Started))
		if m, ok := diff[cell]; ok {
			c.Failure = &junit.Problem{Type: m.Got.String(), Message: m.String() + ": " + res.Message(traces[i]), Text: c.Output}
		} else if !res.Passed() {
			c.Error = &junit.Problem{Type: string(res.Verdict), Message: res.Message(traces[i]), Text: c.Output}
		}
		suite.Cases = append(suite.Cases, c)
	}
	for _, m := range mismatches {
		if m.Got == Pending { // listed in the file, not traced
			suite.Cases = append(suite.Cases, junit.Case{Name: m.Cell.String(), Classname: SuiteName,
				Failure: &junit.Problem{Type: "NotTraced", Message: m.String()}})
		}
	}
	return junit.Report{Name: j.Name, Suites: []junit.Suite{suite}}
}

// WriteFile writes the report to path.
func (j JUnit) WriteFile(path string, cells []Cell, traces []check.Trace, results []check.Result, mismatches []Mismatch) error {
	f, err := os.Create(path) //nolint:gosec // the user names the report file
	if err != nil {
		return fmt.Errorf("write the JUnit report: %w", err)
	}
	if err := junit.Write(f, j.Report(cells, traces, results, mismatches)); err != nil {
		_ = f.Close()
		return fmt.Errorf("write the JUnit report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write the JUnit report %s: %w", path, err)
	}
	return nil
}
