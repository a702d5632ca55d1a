//go:build e2e

package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Issue 26, done-when 2: a path open one way and broken on the way back.
// The lab's drop-replies annotation makes node 2 drop what pod oneway
// answers from TCP 80 (in EgressRule, above the allow of established
// connections). The probe to it, directly and through a Service, is
// delivered; the one-way trace says so and passes; the round trip names
// the table on node 2 where the answer died, and fails; real traffic times
// out.
func TestRoundTripAnswerLostOnTheWayBack(t *testing.T) {
	f := getTraceFixture(t)
	pod := strings.Replace(podSpec(f.ns, "oneway", labNodes[1].name, map[string]string{"app": "oneway"}),
		"metadata: {name: oneway,", "metadata: {annotations: {lab.traceflow.dev/drop-replies: tcp/80}, name: oneway,", 1)
	apply(t, pod+serviceSpec(f.ns, "oneway", "oneway", http80))
	// The fixture's namespace is shared: the faulty pod leaves it after.
	t.Cleanup(func() { mustKubectl(t, "delete", "-n", f.ns, "pod/oneway", "service/oneway", "--wait=false") })
	ip := waitPods(t, f.ns, "oneway")["oneway"].Status.PodIP
	// The lab's agent programs the drop once it sees the annotated pod.
	eventually(t, 30*time.Second, "the drop of oneway's answers on "+labNodes[1].name, func() error {
		if !strings.Contains(nodeExec(t, labNodes[1].name, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int", "table=10"), "nw_src="+ip+",tp_src=80") {
			return errors.New("no drop flow yet")
		}
		return nil
	})
	clusterIP := strings.TrimSpace(mustKubectl(t, "get", "service", "-n", f.ns, "oneway", "-o", "jsonpath={.spec.clusterIP}"))
	for _, dst := range []struct{ name, arg, ip string }{{"pod", "oneway", ip}, {"service", "svc/oneway", clusterIP}} {
		t.Run(dst.name, func(t *testing.T) {
			one := runTrace(t, "-n", f.ns, "a", dst.arg, "--tcp", "80")
			if one.code != 0 {
				t.Errorf("one way: exit %d, want 0 (the probe is delivered)", one.code)
			}
			r := runTrace(t, "-n", f.ns, "a", dst.arg, "--tcp", "80", "--round-trip")
			if real := realTraffic(t, probe{f.ns, "a", "tcp", dst.ip, 80}); real != timedOut {
				t.Fatalf("real traffic %s, want timed-out: the lab's fault is not in place", real)
			}
			if r.code != 2 || r.record == nil {
				t.Fatalf("round trip: exit %d, want 2", r.code)
			}
			ann := r.record.Annotations
			if ann[labels.VerdictAnnotation] != "Delivered" || ann[labels.ReplyAnnotation] != "Lost" {
				t.Fatalf("verdict %q, answer %q; want Delivered and Lost", ann[labels.VerdictAnnotation], ann[labels.ReplyAnnotation])
			}
			var died *report.Observation
			for _, res := range r.record.Status.Results {
				for i, o := range res.Observations {
					if res.Role == report.RoleReply && res.Node == labNodes[1].name && o.Action == report.ActionDropped {
						died = &res.Observations[i]
					}
				}
			}
			if died == nil || died.ComponentInfo != "EgressRule" {
				t.Errorf("the answer's drop on %s: %+v, want one in EgressRule", labNodes[1].name, died)
			}
			if !strings.Contains(r.stderr, "answer Lost") || !strings.Contains(r.stderr, "EgressRule") {
				t.Errorf("the summary and error do not say where the answer died:\n%s", r.stderr)
			}
		})
	}
	assertNothingLeft(t)
}
