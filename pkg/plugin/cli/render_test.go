package cli

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// The summary line counts what the chosen output showed: by default (and
// in -o json|yaml, whose observations are the same summary) Antrea's few
// observations, with the table count beside them; with -o wide or
// --explain every table hop.
func TestSummaryLineCountsWhatTheFormatShows(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	hop := func(table int, name string, o report.Observation) outcome.Update {
		return outcome.Observed{At: outcome.At{Time: now}, Hop: outcome.Hop{Node: "n1", Role: report.RoleSender,
			Observation: o, TableID: table, TableName: name, Flow: "priority=200,ip"}}
	}
	updates := []outcome.Update{
		outcome.TraceStarted{At: outcome.At{Time: now}, Engine: "helper", Source: "default/a", Destination: "default/b"},
		hop(2, "SpoofGuard", report.Observation{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded}),
		hop(3, "ConntrackZone", report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded}),
		hop(7, "L3Forwarding", report.Observation{Component: report.ComponentRouting, Action: report.ActionForwarded}),
		hop(12, "Output", report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionDelivered}),
		outcome.Finished{At: outcome.At{Time: now}, Verdict: outcome.Delivered},
	}
	for _, tt := range []struct {
		format  string
		explain bool
		want    string
	}{
		{outputPlain, false, "; 2 hops (summarised from 4 table hops); "},
		{outputJSON, false, "; 2 hops (summarised from 4 table hops); "},
		{outputPlain, true, "; 4 hops; "},
	} {
		s := newSink(tt.format, tt.explain, false, io.Discard, func() time.Time { return now })
		for _, u := range updates {
			s.Emit(u)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got := s.summary(outcome.ExpectDelivered); !strings.Contains(got, tt.want) {
			t.Errorf("-o %s explain=%v: summary %q, want it to contain %q", tt.format, tt.explain, got, tt.want)
		}
	}
}
