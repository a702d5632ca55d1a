package outcome

import (
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// A trace run again with another engine shows the second run only: the
// first run's nodes, injection and verdict are gone, its warnings and the
// reason for the retry stay.
func TestRetriedForgetsTheFirstRun(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) At { return At{Time: t0.Add(time.Duration(ms) * time.Millisecond)} }
	m := &Model{}
	for _, u := range []Update{
		TraceStarted{At: at(0), Name: "t", Engine: EngineAgent},
		Warning{At: at(1), Message: "before"},
		HelperReady{At: at(2), Node: "n1", Role: report.RoleSender},
		Injected{At: at(2), Node: "n1"},
		Observed{At: at(3), Hop: Hop{Node: "n1", Role: report.RoleSender, Observation: report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded}}},
		Finished{At: at(20000), Verdict: Incomplete, Reason: "Antrea: Traceflow timeout"},
		Retried{At: at(20001), Why: "tracing again with helper pods"},
		TraceStarted{At: at(20002), Name: "t", Engine: "helper"},
	} {
		m.Apply(u)
	}
	if len(m.Nodes) != 0 || m.Finished != nil || !m.InjectedAt.IsZero() {
		t.Errorf("the first run is still in the model: nodes %d, finished %v, injected %v", len(m.Nodes), m.Finished, m.InjectedAt)
	}
	if len(m.Warnings) != 2 || m.Warnings[1].Message != "tracing again with helper pods" {
		t.Errorf("warnings %+v", m.Warnings)
	}
	if m.Trace.Engine != "helper" || !m.Started.Equal(t0.Add(20002*time.Millisecond)) {
		t.Errorf("trace %+v started %v", m.Trace, m.Started)
	}
}
