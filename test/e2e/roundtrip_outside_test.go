//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Issue 26, done-when 4: round trips out of the pod network. On Antrea the
// node's kernel masquerades a pod's packet to an address outside the pod
// network and undoes it on the answer before the answer enters the
// bridge, so the answer is followed back to the pod: the lab's host and
// the other node answer (or refuse a closed port), as real traffic says;
// for an address no host holds, the node itself answers host unreachable
// once its ARP has failed (3 s), which the trace and real traffic that
// waits long enough both see. On the genuine
// OVN-Kubernetes the gateway router translates the source inside OVS: the
// trace says so, keeps the probe's verdict, and warns that the answer is
// not followed.
func TestRoundTripOutside(t *testing.T) {
	f := getTraceFixture(t)
	node2 := labNodes[1]
	if labMode() == modeOVNK {
		// A gateway router that has not learned its next hop's MAC holds
		// the first packet (see TestOVNKNodeAndOutside): real traffic first.
		waitTraffic(t, probe{f.ns, "a", "icmp", labHostIP, 0}, served)
		r := runTrace(t, "-n", f.ns, "a", labHostIP, "--icmp", "--round-trip")
		if r.code != 0 || r.record == nil || r.record.Annotations[labels.ReplyAnnotation] != "" {
			t.Fatalf("exit %d: want 0, the probe's verdict, and no answer's fate", r.code)
		}
		if !strings.Contains(r.stderr, "its answer comes back to that address, which the round trip does not follow yet") {
			t.Errorf("no warning that the SNATed answer is not followed:\n%s", r.stderr)
		}
		return
	}
	for _, tc := range []struct {
		name, dst string
		p         probe
		extra     []string
	}{
		{"lab host, ICMP", labHostIP, probe{f.ns, "a", "icmp", labHostIP, 0}, nil},
		{"lab host, closed TCP port", labHostIP, probe{f.ns, "a", "tcp", labHostIP, 9}, nil},
		{"the other node's kubelet", "node/" + node2.name, probe{f.ns, "a", "tcp", node2.ip, 10250}, nil},
		{"an address no host holds", "10.89.0.99", probe{f.ns, "a", "icmp", "10.89.0.99", 0}, []string{"--timeout", "8s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"-n", f.ns, "a", tc.dst, "--round-trip"}, protoArgs(tc.p)...), tc.extra...)
			r := runTrace(t, args...)
			var real outcome
			if tc.extra == nil {
				real = realTraffic(t, tc.p)
			} else {
				// Long enough for the node's ARP to fail and say so.
				real, _, _ = runWorkload(t, tc.p, kubectlEnv(), "kubectl", "exec", "-n", f.ns, "a", "--", "/workload", "ping", "-timeout", "6s", tc.p.dst)
			}
			want := map[outcome]string{served: "Answered", refused: "Refused", timedOut: "Unanswered"}[real]
			if r.record == nil || r.record.Annotations[labels.VerdictAnnotation] != "ForwardedOutOfNetwork" || r.record.Annotations[labels.ReplyAnnotation] != want {
				t.Fatalf("real traffic %s: want ForwardedOutOfNetwork and %s; exit %d\n%s", real, want, r.code, r.stderr)
			}
			if wantCode := map[bool]int{true: 0, false: 2}[want == "Answered"]; r.code != wantCode {
				t.Errorf("answer %s: exit %d, want %d", want, r.code, wantCode)
			}
		})
	}
	assertNothingLeft(t)
}
