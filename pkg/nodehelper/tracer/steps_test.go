package tracer

import (
	"bytes"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// The ready line carries the setup's steps up to it, the time not spent
// in a named step as "other"; steps timed after it (a continuation's
// flows) are not kept.
func TestReadyLineTimesTheSetup(t *testing.T) {
	var out bytes.Buffer
	s := &session{c: Common{Tag: 5, Out: report.NewWriter(&out, nil)}}
	s.stepped = time.Now().Add(-3 * time.Millisecond)
	s.timed("ofproto/trace")
	s.stepped = s.stepped.Add(-2 * time.Millisecond)
	s.timed("install")
	if err := s.ready(report.RoleSender, 4, "p1", "name"); err != nil {
		t.Fatal(err)
	}
	s.timed("flow dumps")
	l, err := report.ParseLine(out.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got := l.Ready.Setup
	if len(got) != 3 || got[0].Step != "ofproto/trace" || got[1].Step != "install" || got[2].Step != "other" {
		t.Fatalf("steps %+v, want ofproto/trace, install, other", got)
	}
	if got[0].Micros < 3000 || got[1].Micros < 2000 || got[2].Micros < 0 {
		t.Errorf("steps %+v: ofproto/trace at least 3 ms, install at least 2 ms", got)
	}
	if len(s.steps) != 3 {
		t.Errorf("a step after the ready line was kept: %+v", s.steps)
	}
}
