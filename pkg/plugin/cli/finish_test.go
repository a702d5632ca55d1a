package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// The exit code and the final error follow the verdict, the expectation
// and what the destination is; a predicted verdict says so.
func TestFinishJudgesTheOutcome(t *testing.T) {
	gw := &outcome.Hop{Node: "n1", Observation: report.Observation{Action: report.ActionForwardedOutOfNetwork}}
	guess := &outcome.Hop{Node: "n1", Observation: report.Observation{Action: report.ActionDropped, Inferred: true}}
	for _, tc := range []struct {
		name   string
		r      outcome.Ended
		expect string
		code   exitcode.Code
		msg    string
	}{
		{"gateway, pod destination", outcome.Ended{Verdict: outcome.ForwardedOutOfNetwork, Reason: "left", Destination: outcome.DestinationPod, Decided: gw}, "delivered", exitcode.Verdict, "left the pod network"},
		{"gateway, outside destination", outcome.Ended{Verdict: outcome.ForwardedOutOfNetwork, Reason: "left", Destination: outcome.DestinationOutside, Decided: gw}, "delivered", exitcode.OK, ""},
		{"predicted drop", outcome.Ended{Verdict: outcome.Dropped, Reason: "dropped on n1", Destination: outcome.DestinationPod, Decided: guess}, "delivered", exitcode.Verdict, "dropped on n1 (predicted by OVS's trace, not observed)"},
		{"tunnel, no receiver", outcome.Ended{Verdict: outcome.Incomplete, Reason: "no receiver", Destination: outcome.DestinationPod}, "delivered", exitcode.Timeout, "did not complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			o := &TraceOptions{format: outputPlain, expect: tc.expect}
			o.Out, o.ErrOut = &out, &errOut
			s := newSink(outputPlain, false, false, &out, time.Now)
			s.Emit(outcome.TraceStarted{Name: "t", DestinationKind: tc.r.Destination})
			s.Emit(outcome.Finished{Verdict: tc.r.Verdict, Reason: tc.r.Reason, Decided: tc.r.Decided})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			err := o.finish(s, &traceflow.Traceflow{}, tc.r, nil)
			if exitcode.Of(err) != tc.code || (tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg))) {
				t.Errorf("exit %d, %v; want %d saying %q", exitcode.Of(err), err, tc.code, tc.msg)
			}
			if want := fmt.Sprintf("(exit %d)", tc.code); !strings.Contains(out.String(), want) {
				t.Errorf("summary does not end with %s:\n%s", want, out.String())
			}
		})
	}
}
