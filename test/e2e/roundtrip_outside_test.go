//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Issue 26, done-when 4: round trips out of the pod network. On Antrea
// (and in the lab and ovn modes, which egress through antrea-gw0 and the
// management port into the node's kernel) the node's kernel
// masquerades a pod's packet to an address outside the pod network and
// undoes it on the answer before the answer enters the bridge, so the
// answer is followed back to the pod. The helper reads the translation
// from the kernel's connection tracking: the probe's source becomes the
// node's address (translatedSrcIP on the hop that leaves through
// antrea-gw0). The lab's host and
// the other node answer (or refuse a closed port), as real traffic says;
// for an address no host holds, the node itself answers host unreachable
// once its ARP has failed (3 s), which the trace and real traffic that
// waits long enough both see. On the genuine
// OVN-Kubernetes the gateway router translates the source inside OVS: the
// trace shows it (translatedSrcIP), and the answer, which comes back to
// the node's address and a port the router picked, is caught there and
// followed back through the router's un-SNAT to the pod. For an address no
// host holds the gateway router holds the probe while it asks for the MAC
// (out of OVS's sight): the trace says so and is incomplete, never
// delivered.
func TestRoundTripOutside(t *testing.T) {
	f := getTraceFixture(t)
	node2 := labNodes[1]
	if labMode() == modeOVNK {
		// A gateway router that has not learned its next hop's MAC holds
		// the first packet (see TestOVNKNodeAndOutside): real traffic first.
		waitTraffic(t, probe{f.ns, "a", "icmp", labHostIP, 0}, served)
		waitTraffic(t, probe{f.ns, "a", "tcp", node2.ip, 10250}, served)
	}
	for _, tc := range []struct {
		name, dst string
		p         probe
		extra     []string
	}{
		{"lab host, ICMP", labHostIP, probe{f.ns, "a", "icmp", labHostIP, 0}, nil},
		{"lab host, closed TCP port", labHostIP, probe{f.ns, "a", "tcp", labHostIP, 9}, nil},
		{"lab host, closed UDP port", labHostIP, probe{f.ns, "a", "udp", labHostIP, 9}, nil},
		{"the other node's kubelet", "node/" + node2.name, probe{f.ns, "a", "tcp", node2.ip, 10250}, nil},
		{"an address no host holds", "10.89.0.99", probe{f.ns, "a", "icmp", "10.89.0.99", 0}, []string{"--timeout", "8s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.extra != nil && labMode() == modeOVNK {
				noRouterARP(t, f, tc.p)
				return
			}
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
			switch snat := translatedOnTheWayOut(r); {
			case snat == "":
				t.Errorf("no hop says the probe's source was translated on its way out (SNAT seen)")
			case labMode() != modeOVNK && snat != nodeIPOf(t, f.pods["a"].Spec.NodeName):
				t.Errorf("the node's kernel translated the probe's source to %s, want its node's address (%s)", snat, f.pods["a"].Spec.NodeName)
			}
		})
	}
	assertNothingLeft(t)
}

// translatedOnTheWayOut is the address a hop of the probe says its
// source was translated to (the gateway router's SNAT, the node kernel's
// masquerade), "" for none.
func translatedOnTheWayOut(r traceRun) string {
	for _, res := range r.record.Status.Results {
		if res.Role == report.RoleReply {
			continue
		}
		for _, o := range res.Observations {
			if o.TranslatedSrcIP != "" {
				return o.TranslatedSrcIP
			}
		}
	}
	return ""
}

// nodeIPOf is the lab node's address.
func nodeIPOf(t *testing.T, name string) string {
	t.Helper()
	for _, n := range labNodes {
		if n.name == name {
			return n.ip
		}
	}
	t.Fatalf("no lab node %q", name)
	return ""
}

// noRouterARP: on OVN-Kubernetes a probe to an address no host holds is
// held by the gateway router's ARP (ovn-controller keeps it, out of OVS's
// sight): the trace is incomplete (exit 3) and says so, and real traffic
// times out: never delivered.
func noRouterARP(t *testing.T, f *traceFixture, p probe) {
	t.Helper()
	r := runTrace(t, append([]string{"-n", f.ns, "a", p.dst, "--round-trip", "--timeout", "8s"}, protoArgs(p)...)...)
	if r.code != 3 || !strings.Contains(r.stderr, "holds it until it knows the next hop's MAC") {
		t.Errorf("exit %d, want 3 saying the gateway router holds the probe for its ARP:\n%s", r.code, r.stderr)
	}
	if real := realTraffic(t, p); real != timedOut {
		t.Errorf("real traffic to %s: %s, want timed-out", p.dst, real)
	}
}
