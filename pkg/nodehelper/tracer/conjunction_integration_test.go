//go:build integration

package tracer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/tracer"
)

// Issue 14: a policy programmed as Antrea programs a ClusterNetworkPolicy
// (conjunctive matches, one cookie for every flow of the feature, 50 more
// rules in the same table). Before, the helper copied every flow with the
// hop's priority and cookie, clause flows included, with a controller
// action, which OVS refuses (NXBAC_BAD_CONJUNCTION): exit 4. Now the drop
// is observed at the conjunctive flow's table (not inferred), the allowed
// probe is delivered, each verdict agrees with real traffic, and the flows
// a trace installs are bounded by its path, not by the table.
func TestIntegrationConjunctivePolicy(t *testing.T) {
	o := newOneNode(t)
	ids := o.n.ConjunctionPolicy(50,
		ovstest.ConjunctionRule{From: o.a, To: o.b, Port: 80},
		ovstest.ConjunctionRule{From: o.a, To: o.b, Port: 81, Drop: true})
	for _, port := range []int{80, 81} {
		if err := o.b.ServeTCP(o.ctx, port); err != nil {
			t.Fatal(err)
		}
	}
	// Real traffic is the oracle: 80 allowed, 81 dropped.
	if err := o.a.DialTCP(o.b.IP.String()+":80", 3*time.Second); err != nil {
		t.Fatalf("pod-a cannot reach pod-b:80, which the policy allows: %v", err)
	}
	if err := o.a.DialTCP(o.b.IP.String()+":81", time.Second); err == nil {
		t.Fatal("pod-a reached pod-b:81, which the policy drops")
	}
	tableFlows := strings.Count(o.n.DumpFlows(fmt.Sprintf("table=%d", ovstest.TableIngressRule)), "cookie=")
	for _, tc := range []struct {
		port   uint16
		tag    uint8
		id     uint32
		code   int
		action report.Action
	}{
		{80, 50, ids[0], tracer.ExitOK, report.ActionDelivered},
		{81, 51, ids[1], tracer.ExitDropped, report.ActionDropped},
	} {
		t.Run(fmt.Sprint(tc.port), func(t *testing.T) {
			capture, err := o.b.StartCapture()
			if err != nil {
				t.Fatal(err)
			}
			defer capture.Close()
			out, lines := traced(t, o.spec(t, tc.tag, o.b.IP, probe.TCP, tc.port))
			res := result(t, lines)
			if out.ExitCode != tc.code {
				t.Fatalf("exit code %d, want %d; %s\n%s", out.ExitCode, tc.code, res.Explanation.Summary, res.Explanation.Trace)
			}
			obs := observations(lines)
			last := obs[len(obs)-1]
			if last.Action != tc.action || last.Inferred {
				t.Fatalf("last observation %+v, want %s, observed", last, tc.action)
			}
			// The conjunctive hop itself is observed by the real probe.
			var conjHop *report.Hop
			for _, l := range lines {
				if l.Hop != nil && l.Hop.Table == ovstest.TableIngressRule {
					conjHop = l.Hop
				}
			}
			wantFlow := fmt.Sprintf("conj_id=%d,ip", tc.id)
			if conjHop == nil || !conjHop.Observed || conjHop.Flow != wantFlow {
				t.Fatalf("IngressRule hop %+v, want the flow %s, observed", conjHop, wantFlow)
			}
			if tc.action == report.ActionDropped {
				if last.Component != report.ComponentNetworkPolicy || last.ComponentInfo != "IngressRule" {
					t.Errorf("drop at %s/%s, want NetworkPolicy/IngressRule", last.Component, last.ComponentInfo)
				}
			} else if _, ok := capture.WaitFor(2*time.Second, func(f []byte) bool {
				s, err := probe.Decode(f)
				return err == nil && dscp.Value(s.Tag) == tc.tag && s.DstIP == o.b.IP
			}); !ok {
				t.Error("the allowed probe never appeared on pod-b's eth0")
			}
			ready := lines[0].Ready
			cleanup := lines[len(lines)-1].Cleanup
			hops := len(res.Explanation.Hops)
			t.Logf("flows: %d before the probe (ready), %d in all (cleanup), %d hops, %d flows in IngressRule",
				ready.Flows, cleanup.FlowsInstalled, hops, tableFlows)
			if cleanup.FlowsInstalled < ready.Flows || cleanup.FlowsInstalled > 10*hops {
				t.Errorf("%d flows installed in all (%d before the probe) for %d hops: want at most 10 per hop", cleanup.FlowsInstalled, ready.Flows, hops)
			}
			o.assertNoTraceFlows(t, lines[0])
		})
	}
}
