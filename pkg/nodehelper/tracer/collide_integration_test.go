//go:build integration

package tracer_test

import (
	"context"
	"sync"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/tracer"
)

// Round trips from one source at the same time, in one process (a serve
// helper's traces): their answers' catch flows would be the same flow
// where two probes share a source port (TCP, UDP) or a source address
// (ICMP echo replies and errors, which OpenFlow cannot tell apart by the
// probe they answer). One trace's catch then replaced the other's, whose
// answer was reported lost or unanswered (a matrix in ovn mode met it, one
// cell in about 1,500). Every answer here must be followed to its source.
func TestIntegrationRoundTripsFromOneSourceAtOnce(t *testing.T) {
	o := newOneNode(t)
	for _, p := range []*ovstest.Pod{o.b, o.c} {
		if err := p.ServeTCP(o.ctx, 80); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		dst     string
		proto   probe.Protocol
		port    uint16
		srcPort uint16
		kind    string
		refused bool
	}{
		{"tcp b open", "b", probe.TCP, 80, 61234, "SYN-ACK", false},
		{"tcp b closed", "b", probe.TCP, 81, 61234, "RST", true},
		{"tcp c open", "c", probe.TCP, 80, 61234, "SYN-ACK", false},
		{"icmp b", "b", probe.ICMP, 0, 0, "echo reply", false},
		{"icmp c", "c", probe.ICMP, 0, 0, "echo reply", false},
		{"icmp d", "d", probe.ICMP, 0, 0, "echo reply", false},
		{"udp c closed", "c", probe.UDP, 5354, 0, "ICMP DestinationUnreachable(Port)", true},
		{"udp d closed", "d", probe.UDP, 5354, 0, "ICMP DestinationUnreachable(Port)", true},
	}
	dsts := map[string]*ovstest.Pod{"b": o.b, "c": o.c, "d": o.d}
	type run struct {
		out  tracer.Outcome
		err  error
		buf  syncBuffer
		spec tracer.TraceSpec
	}
	runs := make([]*run, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		r := &run{}
		runs[i] = r
		r.spec = o.spec(t, uint8(20+i), dsts[c.dst].IP, c.proto, c.port)
		r.spec.ReplyTag, r.spec.SrcPort = uint8(40+i), c.srcPort
		r.spec.Out = report.NewWriter(&r.buf, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.out, r.err = tracer.Trace(context.Background(), r.spec)
		}()
	}
	wg.Wait()
	for i, c := range cases {
		r := runs[i]
		t.Run(c.name, func(t *testing.T) {
			if r.err != nil {
				t.Fatalf("trace to %s: %v\n%s", dsts[c.dst].IP, r.err, r.buf.String())
			}
			fwd, answer := splitReply(parseLines(t, r.buf.String()))
			res := result(t, fwd)
			if r.out.ExitCode != tracer.ExitOK {
				t.Fatalf("probe: exit %d: %s", r.out.ExitCode, res.Explanation.Summary)
			}
			checkAnswer(t, answer, c.kind, c.refused, "default/pod-a")
		})
	}
}
