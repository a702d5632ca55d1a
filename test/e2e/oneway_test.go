//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Issue 26, done-when 2: a path open one way and broken on the way back.
// Node 2 drops what pod oneway answers from TCP 80: in lab mode the lab's
// drop-replies annotation puts a drop in EgressRule, above the allow of
// established connections; in the OVN modes a logical router policy on
// ovn_cluster_router drops it where the answer is routed, on node 2 (the
// genuine OVN-Kubernetes: in node 2's own zone); on the genuine Antrea a
// drop flow the test adds to table 0 (PipelineRootClassifier). The
// probe to it, directly and through a Service, is delivered; the one-way
// trace says so and passes; the round trip names the stage on node 2
// where the answer died, and fails; real traffic times out.
func TestRoundTripAnswerLostOnTheWayBack(t *testing.T) {
	f := getTraceFixture(t)
	node := labNodes[1].name
	pod := podSpec(f.ns, "oneway", node, map[string]string{"app": "oneway"})
	if labMode() == modeLab {
		pod = strings.Replace(pod, "metadata: {name: oneway,", "metadata: {annotations: {lab.traceflow.dev/drop-replies: tcp/80}, name: oneway,", 1)
	}
	apply(t, pod+serviceSpec(f.ns, "oneway", "oneway", http80))
	// The fixture's namespace is shared: the faulty pod leaves it after.
	t.Cleanup(func() { mustKubectl(t, "delete", "-n", f.ns, "pod/oneway", "service/oneway", "--wait=false") })
	ip := waitPods(t, f.ns, "oneway")["oneway"].Status.PodIP
	where := dropAnswers(t, node, ip)
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
			if died == nil || !strings.Contains(died.ComponentInfo, where) {
				t.Errorf("the answer's drop on %s: %+v, want one in %s", node, died, where)
			}
			if !strings.Contains(r.stderr, "answer Lost") || !strings.Contains(r.stderr, where) {
				t.Errorf("the summary and error do not say where the answer died:\n%s", r.stderr)
			}
		})
	}
	t.Run("check suite", func(t *testing.T) { checkSuiteRoundTrips(t, f.ns, where) })
	assertNothingLeft(t)
}

// checkSuiteRoundTrips runs a check suite that states round trips (issue
// 26, done-when 6): an answered one and a refused one pass; the one whose
// answer the lab drops fails, and its JUnit failure says the answer's way
// (reply), its fate and the hop that decided it.
func checkSuiteRoundTrips(t *testing.T, ns, where string) {
	report := filepath.Join(t.TempDir(), "junit.xml")
	r := runCheck(t, fmt.Sprintf(`apiVersion: %s
kind: %s
defaults: {namespace: %s, roundTrip: true}
cases:
- {name: a is answered by b, from: {pod: a}, to: {pod: b}, port: 80}
- {name: b refuses port 81, from: {pod: a}, to: {pod: b}, port: 81, expect: refused}
- {name: oneway answers (it does not), from: {pod: a}, to: {pod: oneway}, port: 80}
`, check.APIVersion, check.Kind, ns), "-f", "-", "--junit", report)
	if r.code != 2 || len(r.cases) != 3 {
		t.Fatalf("exit %d with %d results, want 2 with 3", r.code, len(r.cases))
	}
	// -o json writes each trace as it ends, in no fixed order.
	for _, c := range r.cases {
		if c.Passed != (c.Case != "oneway answers (it does not)") {
			t.Errorf("case %q passed=%v: want only the oneway case to fail (%s)", c.Case, c.Passed, c.Message)
		}
	}
	xml := validateJUnit(t, report)
	t.Logf("JUnit report:\n%s", xml)
	for _, want := range []string{`type="Lost"`, "reply: ", where, labNodes[1].name} {
		if !strings.Contains(xml, want) {
			t.Errorf("the JUnit failure does not say %q", want)
		}
	}
}

// dropAnswers makes node drop what the pod at ip answers from TCP 80, and
// returns the name of the stage that drops it. Lab mode: the lab's agent
// programs the drop for the pod's annotation (EgressRule). OVN modes: a
// logical router policy drops it in ovn_cluster_router's lr_in_policy,
// which runs on node 2 for a packet from node 2's switch (node 2's NB is
// its zone's on the genuine OVN-Kubernetes, the central one in ovn mode).
// Antrea: a drop flow of the test's own in table 0.
func dropAnswers(t *testing.T, node, ip string) string {
	t.Helper()
	if labMode() == modeOVN || labMode() == modeOVNK {
		match := "ip4.src == " + ip + " && tcp && tcp.src == 80"
		nodeExec(t, node, "ovn-nbctl", "--db", ovnNB, "lr-policy-add", "ovn_cluster_router", "2000", match, "drop")
		t.Cleanup(func() {
			nodeExec(t, node, "ovn-nbctl", "--db", ovnNB, "lr-policy-del", "ovn_cluster_router", "2000", match)
		})
		return "lr_in_policy"
	}
	if labMode() == modeAntrea {
		// Antrea's agent leaves a flow of another cookie alone: the answer
		// meets it first thing, in PipelineRootClassifier.
		flow := "cookie=0x7e57,table=0,priority=65000,tcp,nw_src=" + ip + ",tp_src=80,actions=drop"
		nodeExec(t, node, "ovs-ofctl", "-O", "OpenFlow15", "add-flow", "br-int", flow)
		t.Cleanup(func() { nodeExec(t, node, "ovs-ofctl", "-O", "OpenFlow15", "del-flows", "br-int", "cookie=0x7e57/-1") })
		return "PipelineRootClassifier"
	}
	eventually(t, 30*time.Second, "the drop of "+ip+"'s answers on "+node, func() error {
		if !strings.Contains(nodeExec(t, node, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int", "table=10"), "nw_src="+ip+",tp_src=80") {
			return errors.New("no drop flow yet")
		}
		return nil
	})
	return "EgressRule"
}
