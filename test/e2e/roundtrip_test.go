//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// replyFor is the answer's fate real traffic's outcome stands for: served
// is an answer that came back, refused a RST or ICMP error that did.
var replyFor = map[outcome]string{served: "Answered", refused: "Refused"}

// Issue 26, done-when 1: with --round-trip, the destination's own answer
// is followed back to the source, hop by hop, and its fate agrees with
// real traffic between the same pods: a listening port answers, a closed
// one refuses (TCP RST, ICMP port unreachable), across nodes, on one
// node, and through a Service (whose answer comes back un-DNATed); a probe
// a policy drops has no answer to follow.
func TestRoundTrip(t *testing.T) {
	f := getTraceFixture(t)
	b, c := f.pods["b"].Status.PodIP, f.pods["c"].Status.PodIP
	clusterIP := strings.TrimSpace(mustKubectl(t, "get", "service", "-n", f.ns, "web", "-o", "jsonpath={.spec.clusterIP}"))
	cases := []struct {
		name string
		p    probe
		dst  string
		// sameNode: the answer never leaves the destination's node.
		sameNode bool
	}{
		{"tcp across nodes", probe{f.ns, "a", "tcp", b, 80}, "b", false},
		{"tcp closed port", probe{f.ns, "a", "tcp", b, 81}, "b", false},
		{"udp echo", probe{f.ns, "a", "udp", b, 5000}, "b", false},
		{"udp closed port", probe{f.ns, "a", "udp", b, 5001}, "b", false},
		{"icmp", probe{f.ns, "a", "icmp", b, 0}, "b", false},
		{"tcp on one node", probe{f.ns, "a", "tcp", c, 80}, "c", true},
		{"service", probe{f.ns, "a", "tcp", clusterIP, 80}, "svc/web", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-n", f.ns, "a", tc.dst, "--round-trip"}, protoArgs(tc.p)...)
			if tc.dst == "svc/web" {
				args = []string{"-n", f.ns, "a", tc.dst, "--round-trip"}
			}
			r := runTrace(t, args...)
			real := realTraffic(t, tc.p)
			want, ok := replyFor[real]
			if !ok {
				t.Fatalf("real traffic %s: the destination must answer for this case", real)
			}
			checkRoundTrip(t, r, want, f.ns+"/a", tc.sameNode)
			if tc.dst == "svc/web" {
				checkUnDNAT(t, r, clusterIP)
			}
			wantCode := 0
			if want != "Answered" {
				wantCode = 2
			}
			if r.code != wantCode {
				t.Errorf("answer %s: exit %d, want %d", want, r.code, wantCode)
			}
		})
	}
	t.Run("expect refused", func(t *testing.T) {
		r := runTrace(t, "-n", f.ns, "a", "b", "--tcp", "81", "--round-trip", "--expect", "refused")
		if r.code != 0 {
			t.Errorf("a refused answer with --expect refused: exit %d, want 0", r.code)
		}
	})
	t.Run("hairpin is not followed", func(t *testing.T) {
		// b through the Service back to itself: the pipeline translates the
		// source on the way (hairpin SNAT), so the answer goes to an
		// address the catch does not know; the trace says so.
		r := runTrace(t, "-n", f.ns, "b", "svc/web", "--round-trip")
		if real := realTraffic(t, probe{f.ns, "b", "tcp", clusterIP, 80}); real != served {
			t.Fatalf("real traffic b -> svc/web %s, want served", real)
		}
		if r.code != 0 || r.record == nil || r.record.Annotations[labels.VerdictAnnotation] != "Delivered" {
			t.Fatalf("exit %d: want 0 and Delivered", r.code)
		}
		if fate, ok := r.record.Annotations[labels.ReplyAnnotation]; ok {
			t.Errorf("the hairpin's answer is said to be %s, but it cannot be followed", fate)
		}
		if !strings.Contains(r.stderr, "the answer was not followed") {
			t.Errorf("no warning that the answer was not followed:\n%s", r.stderr)
		}
	})
	t.Run("dropped has no answer", func(t *testing.T) {
		p := probe{f.ns, "a", "tcp", f.pods["locked"].Status.PodIP, 80}
		r := runTrace(t, "-n", f.ns, "a", "locked", "--tcp", "80", "--round-trip")
		if real := realTraffic(t, p); real != timedOut {
			t.Fatalf("real traffic to the locked pod %s, want timed-out", real)
		}
		if r.code != 2 || r.record == nil || r.record.Annotations[labels.VerdictAnnotation] != "Dropped" {
			t.Fatalf("exit %d, record %v: want 2 and Dropped", r.code, r.record != nil)
		}
		if fate, ok := r.record.Annotations[labels.ReplyAnnotation]; ok {
			t.Errorf("a dropped probe's record says its answer was %s", fate)
		}
	})
	assertNothingLeft(t)
}

// checkRoundTrip checks a round trip's record: the probe delivered, the
// answer's fate, and the answer's hops as reply results ending with a
// delivery to the source pod (on the source's node), after the
// destination's node for an answer that crossed nodes.
func checkRoundTrip(t *testing.T, r traceRun, fate, source string, sameNode bool) {
	t.Helper()
	if r.record == nil {
		t.Fatalf("no record: %s", r.stderr)
	}
	ann := r.record.Annotations
	if ann[labels.VerdictAnnotation] != "Delivered" || ann[labels.ReplyAnnotation] != fate {
		t.Fatalf("verdict %q, answer %q; want Delivered, %s", ann[labels.VerdictAnnotation], ann[labels.ReplyAnnotation], fate)
	}
	var replies []report.NodeResult
	for _, res := range r.record.Status.Results {
		if res.Role == report.RoleReply {
			replies = append(replies, res)
		}
	}
	wantNodes := 2
	if sameNode {
		wantNodes = 1
	}
	if len(replies) != wantNodes {
		t.Fatalf("%d reply results, want %d: %+v", len(replies), wantNodes, r.record.Status.Results)
	}
	home := replies[len(replies)-1]
	last := home.Observations[len(home.Observations)-1]
	if home.Node != labNodes[0].name || last.Action != report.ActionDelivered || last.Pod != source {
		t.Errorf("the answer ends %s on %s (pod %q), want Delivered to %s on %s", last.Action, home.Node, last.Pod, source, labNodes[0].name)
	}
	if !sameNode {
		out := replies[0].Observations
		if replies[0].Node != labNodes[1].name || out[0].Action != report.ActionReceived || out[len(out)-1].Action != report.ActionForwarded {
			t.Errorf("the answer on %s: %+v, want Received from the destination, then Forwarded toward the source", replies[0].Node, out)
		}
	}
}

// checkUnDNAT checks that the answer of a trace through a Service was seen
// leaving with the endpoint's address and coming back from the Service's.
func checkUnDNAT(t *testing.T, r traceRun, clusterIP string) {
	t.Helper()
	for _, res := range r.record.Status.Results {
		for _, o := range res.Observations {
			if res.Role == report.RoleReply && o.TranslatedSrcIP == clusterIP {
				return
			}
		}
		for _, h := range res.TableHops {
			if res.Role == report.RoleReply && h.TranslatedSrcIP == clusterIP {
				return
			}
		}
	}
	t.Errorf("no reply observation has translatedSrcIP %s (the answer's source un-DNATed to the Service): %+v", clusterIP, r.record.Status.Results)
}
