//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Issue 10's cases: each test makes its own namespace and checks only what
// it created (its pods, its trace's helper pods and record), so that it can
// run while other people use the lab.

// withAnnotations adds annotations to a podSpec manifest.
func withAnnotations(manifest string, ann map[string]string) string {
	var kv []string
	for k, v := range ann {
		kv = append(kv, fmt.Sprintf("%q: %q", k, v))
	}
	return strings.Replace(manifest, "}}\nspec:", "}, annotations: {"+strings.Join(kv, ", ")+"}}\nspec:", 1)
}

// assertTraceGone checks that this trace left no helper pod and no record.
func assertTraceGone(t testing.TB, r traceRun) {
	t.Helper()
	if r.record == nil {
		return
	}
	name := r.record.Name
	eventually(t, 10*time.Second, "helper pods of "+name+" deleted", func() error {
		out, err := kubectl(context.Background(), "get", "pods", "-A", "-l", labels.Trace+"="+name, "-o", "name")
		if err == nil && strings.TrimSpace(out) != "" {
			return fmt.Errorf("left: %s", out)
		}
		return err
	})
	if out, _ := kubectl(context.Background(), "get", "traceflow", name, "-o", "name", "--ignore-not-found"); strings.TrimSpace(out) != "" {
		t.Errorf("trace record %s left without --keep", name)
	}
}

// waitTraffic waits until real traffic meets want (the lab agent applies
// policies and annotations within a sync, a moment after the API has them).
func waitTraffic(t testing.TB, p probe, want outcome) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("real traffic %+v to be %s", p, want), func() error {
		if got := realTraffic(t, p); got != want {
			return fmt.Errorf("it is %s", got)
		}
		return nil
	})
}

// Done-when 1: a pod reaching itself through its own Service.
func TestTraceHairpinThroughService(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "hairpin")
	self, clusterIP := selfService(t, ns)
	p := probe{ns, "self", "tcp", clusterIP, 80}
	waitTraffic(t, p, served)
	r, _ := traceAndTraffic(t, p, "", "-n", ns, "self", "svc/self", "--tcp", "80")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 (Delivered)", r.code)
	}
	// Hop by hop: the Service's LB picked the pod itself, and the packet
	// was delivered back to it.
	obs := r.result(t, labNodes[1].name).Observations
	lb := false
	for _, o := range obs {
		lb = lb || (o.Component == report.ComponentLB && o.TranslatedDstIP == self.Status.PodIP)
	}
	if !lb || len(obs) < 3 {
		t.Errorf("want several hops with an LB hop translating to %s; got %+v", self.Status.PodIP, obs)
	}
	if o := last(r.result(t, labNodes[1].name)); o.Action != report.ActionDelivered {
		t.Errorf("last observation %+v, want Delivered", o)
	}
	assertTraceGone(t, r)
}

// Done-when 4: a pod destination the lab routes through the gateway
// (lab.traceflow.dev/route: gateway) is delivered only when it really
// arrives on its node; a policy drop there makes --expect delivered fail.
func TestTraceThroughGateway(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "gateway")
	apply(t, podSpec(ns, "client", labNodes[0].name, map[string]string{"role": "client"})+
		withAnnotations(podSpec(ns, "routed", labNodes[1].name, map[string]string{"app": "routed"}),
			map[string]string{"lab.traceflow.dev/route": "gateway"}))
	pods := waitPods(t, ns, "client", "routed")
	ip := pods["routed"].Status.PodIP
	// Node 1 sends the pod's packets out of antrea-gw0 and routes them over
	// the underlay: the lab agent's flow and kernel route are in place.
	flowMatch := "priority=195,ip,nw_dst=" + ip + " "
	eventually(t, 30*time.Second, "the gateway route for "+ip+" on "+labNodes[0].name, func() error {
		fl := nodeExec(t, labNodes[0].name, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int", "table=12")
		rt := nodeExec(t, labNodes[0].name, "ip", "route", "show", ip)
		if !strings.Contains(fl, flowMatch) || !strings.Contains(rt, "via "+labNodes[1].ip) {
			return fmt.Errorf("flows:\n%s\nroute: %q", fl, rt)
		}
		return nil
	})
	p := probe{ns, "client", "tcp", ip, 80}
	waitTraffic(t, p, served)
	// The real traffic took the gateway: the routed flow counted it.
	if fl := nodeExec(t, labNodes[0].name, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int", "table=12,ip,nw_dst="+ip); strings.Contains(fl, "n_packets=0,") {
		t.Errorf("real traffic did not take the gateway flow:\n%s", fl)
	}

	t.Run("delivered", func(t *testing.T) {
		r, _ := traceAndTraffic(t, p, "delivered", "-n", ns, "client", "routed", "--tcp", "80")
		if r.code != 0 {
			t.Fatalf("exit %d, want 0", r.code)
		}
		if o := last(r.result(t, labNodes[1].name)); o.Action != report.ActionDelivered {
			t.Errorf("destination node's last observation %+v, want Delivered", o)
		}
		assertTraceGone(t, r)
	})
	t.Run("dropped-on-the-destination-node", func(t *testing.T) {
		apply(t, denyIngress(ns, "deny-routed", "routed"))
		waitTraffic(t, p, timedOut)
		r, _ := traceAndTraffic(t, p, "delivered", "-n", ns, "client", "routed", "--tcp", "80")
		if r.code != 2 {
			t.Fatalf("exit %d, want 2 (not delivered)", r.code)
		}
		assertTraceGone(t, r)
	})
}

// Done-when 6: the lab's reject rule (lab.traceflow.dev/action: reject) is
// Rejected, and --expect rejected passes; a plain drop is still Dropped.
func TestTraceRejectAndDrop(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "reject")
	apply(t, podSpec(ns, "client", labNodes[0].name, map[string]string{"role": "client"})+
		podSpec(ns, "rejecting", labNodes[1].name, map[string]string{"app": "rejecting"})+
		podSpec(ns, "near", labNodes[0].name, map[string]string{"app": "rejecting"})+
		podSpec(ns, "dropping", labNodes[1].name, map[string]string{"app": "dropping"})+
		netpol{ns: ns, name: "reject-all", app: "rejecting", types: []string{"Ingress"}, annotation: `"lab.traceflow.dev/action": reject`}.yaml()+
		denyIngress(ns, "drop-all", "dropping"))
	pods := waitPods(t, ns, "client", "rejecting", "near", "dropping")
	for _, c := range []struct {
		name, dst, proto string
		port             int
		expect           string
		real             outcome
	}{
		{"tcp-inter-node", "rejecting", "tcp", 80, "rejected", refused},
		{"tcp-intra-node", "near", "tcp", 80, "rejected", refused},
		{"udp", "rejecting", "udp", 5000, "rejected", refused},
		{"icmp", "rejecting", "icmp", 0, "rejected", refused},
		{"tcp-plain-drop", "dropping", "tcp", 80, "", timedOut},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := probe{ns, "client", c.proto, pods[c.dst].Status.PodIP, c.port}
			waitTraffic(t, p, c.real)
			r, _ := traceAndTraffic(t, p, c.expect, append([]string{"-n", ns, "client", c.dst}, protoArgs(p)...)...)
			want := 0
			if c.expect == "" {
				want = 2
			}
			if r.code != want {
				t.Errorf("exit %d, want %d", r.code, want)
			}
			assertTraceGone(t, r)
		})
	}
}

// Done-when 7: the same trace three times in a row gives the same verdict,
// and none runs out of time under --timeout 20s. Times are logged, not
// asserted.
func TestTraceRepeatable(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "repeat")
	apply(t, podSpec(ns, "a", labNodes[0].name, map[string]string{"role": "client"})+
		podSpec(ns, "c", labNodes[0].name, map[string]string{"app": "peer"})+
		podSpec(ns, "locked", labNodes[1].name, map[string]string{"app": "locked"})+
		netpol{ns: ns, name: "deny-80", app: "locked", types: []string{"Ingress"}, ingress: []string{tcpRule("", 8080)}}.yaml())
	pods := waitPods(t, ns, "a", "c", "locked")
	for _, c := range []struct {
		name  string
		p     probe
		extra []string
	}{
		{"icmp-delivered", probe{ns, "a", "icmp", pods["c"].Status.PodIP, 0}, nil},
		{"tcp-policy-drop", probe{ns, "a", "tcp", pods["locked"].Status.PodIP, 80}, nil},
		// A mid-stream ACK: the lab's conntrack picks it up as new, and its
		// policy is by address and port, so it meets what a SYN meets.
		{"tcp-flags-ack", probe{ns, "a", "tcp", pods["c"].Status.PodIP, 80}, []string{"--tcp-flags", "ACK"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := "c"
			if c.p.dst == pods["locked"].Status.PodIP {
				dst = "locked"
			}
			var verdicts [][]report.Action
			for i := range 3 {
				args := append(append([]string{"-n", ns, "a", dst, "--timeout", "20s"}, protoArgs(c.p)...), c.extra...)
				start := time.Now()
				r := runTrace(t, args...)
				t.Logf("run %d: exit %d in %s", i+1, r.code, time.Since(start).Round(time.Millisecond))
				if r.code == 3 {
					t.Errorf("run %d ran out of time (exit 3)", i+1)
				}
				verdicts = append(verdicts, terminalActions(r))
				checkAgainstTraffic(t, r, realTraffic(t, c.p), "")
				assertTraceGone(t, r)
			}
			for i := 1; i < len(verdicts); i++ {
				if fmt.Sprint(verdicts[i]) != fmt.Sprint(verdicts[0]) {
					t.Errorf("run %d said %v, run 1 said %v", i+1, verdicts[i], verdicts[0])
				}
			}
		})
	}
}
