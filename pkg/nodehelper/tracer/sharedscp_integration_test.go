//go:build integration

package tracer_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/tracer"
)

// Traces of one run may share a DSCP value, told apart by the ECN codepoint
// of their tags (dscp.Tag): three round trips from one pod at once, all
// three probes DSCP 9 and all three answers DSCP 13, one of them through a
// Service (conntrack, a select group, a continuation). They pass the same
// flows (the source's port, the conntrack tables), whose tagged copies
// would be one flow to OVS were the ECN codepoint not in their match, the
// last installed taking every probe's packet-ins for its own trace. Each
// trace must report its own path, from every hop the real probe passed,
// its own verdict and its own answer.
func TestIntegrationTracesSharingADSCPValue(t *testing.T) {
	o := newOneNode(t)
	o.serveTCP(t, 80, o.b, o.c)
	cases := []struct {
		name string
		dst  netip.Addr
		pod  string
	}{
		{"pod b", o.b.IP, "default/pod-b"},
		{"pod c", o.c.IP, "default/pod-c"},
		{"service", netip.MustParseAddr(o.svc.VIP), "default/pod-b"},
	}
	type run struct {
		out tracer.Outcome
		err error
		buf syncBuffer
	}
	runs := make([]*run, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		r := &run{}
		runs[i] = r
		ecn := uint8(i) //nolint:gosec // three cases
		spec := o.spec(t, dscp.Tag(9, ecn), c.dst, probe.TCP, 80)
		spec.ReplyTag, spec.Timeout = dscp.Tag(13, ecn), 20*time.Second
		spec.Out = report.NewWriter(&r.buf, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.out, r.err = tracer.Trace(context.Background(), spec)
		}()
	}
	wg.Wait()
	for i, c := range cases {
		r := runs[i]
		t.Run(c.name, func(t *testing.T) {
			if r.err != nil {
				t.Fatalf("trace: %v\n%s", r.err, r.buf.String())
			}
			fwd, answer := splitReply(parseLines(t, r.buf.String()))
			if want := dscp.Tag(9, uint8(i)); fwd[0].Ready == nil || fwd[0].Ready.Tag != want { //nolint:gosec // three cases
				t.Errorf("first line %+v, want the ready line of tag %s", fwd[0], dscp.Name(want))
			}
			res := result(t, fwd)
			if r.out.ExitCode != tracer.ExitOK {
				t.Fatalf("probe: exit %d: %s", r.out.ExitCode, res.Explanation.Summary)
			}
			obs := observations(fwd)
			wantActions(t, obs, report.ActionDelivered)
			if last := obs[len(obs)-1]; last.Pod != c.pod {
				t.Errorf("delivered to %q, want %s", last.Pod, c.pod)
			}
			for _, l := range fwd {
				if l.Hop != nil && !l.Hop.Observed {
					t.Errorf("hop %d (%s) not observed for real", l.Hop.Index, l.Hop.TableName)
				}
			}
			checkAnswer(t, answer, "SYN-ACK", false, "default/pod-a")
			o.assertNoTraceFlows(t, fwd[0])
		})
	}
}
