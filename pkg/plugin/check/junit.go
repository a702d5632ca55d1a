package check

import (
	"fmt"
	"os"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/junit"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// JUnit is the report of a run for CI (--junit): one testsuite per file,
// one testcase per trace; a missed expectation is a failure, a trace that
// did not complete an error. A round trip's failure names the way that
// decided it, forward or reply, and that way's hop (Result.Message).
type JUnit struct {
	// Name names the report.
	Name string
	// Started is when the run started: every suite's timestamp, and where
	// its time counts from.
	Started time.Time
	// PathText renders a trace's path as its case's output. The caller
	// passes its renderer: the check runner returns results and leaves the
	// rendering to the commands.
	PathText func(*outcome.Model) string
}

// Report builds the report of traces and their results, in the same order.
func (j JUnit) Report(traces []Trace, results []Result) junit.Report {
	rep := junit.Report{Name: j.Name}
	index := map[string]int{}
	for i, t := range traces {
		si, ok := index[t.File]
		if !ok {
			si = len(rep.Suites)
			index[t.File] = si
			rep.Suites = append(rep.Suites, junit.Suite{Name: t.File, Timestamp: j.Started})
		}
		r := results[i]
		s := &rep.Suites[si]
		s.Time = max(s.Time, r.Done.Sub(j.Started))
		c := junit.Case{Name: t.Name, Classname: t.File, Time: r.Done.Sub(r.Started)}
		if r.Model != nil {
			c.Output = j.PathText(r.Model)
		}
		switch {
		case r.Passed():
		case r.Code == exitcode.Verdict:
			c.Failure = &junit.Problem{Type: problemType(t, r), Message: r.Message(t), Text: c.Output}
		default:
			c.Error = &junit.Problem{Type: problemType(t, r), Message: r.Message(t), Text: c.Output}
		}
		s.Cases = append(s.Cases, c)
	}
	return rep
}

// problemType is the kind of a failure: the probe's verdict, or, where
// the answer decided a round trip, the answer's fate (Lost, Refused, ...).
func problemType(t Trace, r Result) string {
	if r.Direction(t) == Reply {
		return string(r.Reply.Fate)
	}
	return string(r.Verdict)
}

// WriteFile writes the report of traces and their results to path.
func (j JUnit) WriteFile(path string, traces []Trace, results []Result) error {
	f, err := os.Create(path) //nolint:gosec // the user names the report file
	if err != nil {
		return fmt.Errorf("write the JUnit report: %w", err)
	}
	if err := junit.Write(f, j.Report(traces, results)); err != nil {
		_ = f.Close()
		return fmt.Errorf("write the JUnit report %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write the JUnit report %s: %w", path, err)
	}
	return nil
}
