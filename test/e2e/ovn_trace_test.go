//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Issue 13: the helper on OVN, named in OVN's words. The trace fixture's
// pods: a and c on node 1, b and locked on node 2, Service web in front of
// b, and a NetworkPolicy denying all ingress to locked.

// observations returns the record's observations on node.
func observations(t testing.TB, r traceRun, node string) []report.Observation {
	t.Helper()
	return r.result(t, node).Observations
}

// hasHopOn reports whether one of hops is named on datapath, as OVN's
// words name a hop: "STAGE (DATAPATH)".
func hasHopOn(hops []report.Observation, datapath string) bool {
	for _, h := range hops {
		if strings.HasSuffix(h.ComponentInfo, "("+datapath+")") {
			return true
		}
	}
	return false
}

// hasHop reports whether one of obs is named stage (a prefix) on datapath,
// with component c, as OVN's words name it: "STAGE (DATAPATH)".
func hasHop(obs []report.Observation, stagePrefix, datapath string, c report.Component) bool {
	for _, o := range obs {
		if strings.HasPrefix(o.ComponentInfo, stagePrefix) && strings.HasSuffix(o.ComponentInfo, "("+datapath+")") && o.Component == c {
			return true
		}
	}
	return false
}

// eachProtocolDelivered traces a to dst (a pod of the trace fixture) over
// TCP, UDP and ICMP, each in a subtest: the verdict must be Delivered, as
// real traffic is; check looks at the record, and nothing may be left.
func eachProtocolDelivered(t *testing.T, f *traceFixture, dst string, check func(t *testing.T, r traceRun)) {
	for _, proto := range []struct {
		name string
		port int
	}{{"tcp", 80}, {"udp", 5000}, {"icmp", 0}} {
		t.Run("--"+proto.name, func(t *testing.T) {
			p := probe{f.ns, "a", proto.name, f.pods[dst].Status.PodIP, proto.port}
			r, _ := traceAndTraffic(t, p, "", append([]string{"-n", f.ns, "a", dst}, protoArgs(p)...)...)
			if r.code != 0 {
				t.Fatalf("exit %d, want 0", r.code)
			}
			check(t, r)
			assertNothingLeft(t)
		})
	}
}

// Done-when 1: across nodes, every protocol, hops named by OVN's stages and
// datapaths (the node's switch, the cluster router, the destination's
// switch), the sender forwarding into the tunnel, the receiver receiving and
// delivering; each verdict held to real traffic.
func TestTraceOVNAcrossNodesNamed(t *testing.T) {
	f := getTraceFixture(t)
	eachProtocolDelivered(t, f, "b", func(t *testing.T, r traceRun) {
		sender := observations(t, r, labNodes[0].name)
		if o := sender[len(sender)-1]; o.Action != report.ActionForwarded || o.TunnelDstIP != labNodes[1].ip {
			t.Errorf("sender's last observation %+v, want Forwarded into the tunnel to %s", o, labNodes[1].ip)
		}
		if !hasHop(sender, "ls_in_", labNodes[0].name, report.ComponentForwarding) ||
			!hasHop(sender, "lr_in_ip_routing", "ovn_cluster_router", report.ComponentRouting) {
			t.Errorf("the sender's hops are not named by the source switch's stages and the router's routing stage: %+v", sender)
		}
		// Interconnect: the other node's zone is reached through the
		// transit switch, whose port to it is the tunnel.
		if modeRow(labMode()).interconnect && !hasHopOn(sender, "transit_switch") {
			t.Errorf("the sender's hops do not pass the transit switch: %+v", sender)
		}
		recv := observations(t, r, labNodes[1].name)
		if len(recv) < 2 || recv[0].Action != report.ActionReceived || recv[len(recv)-1].Action != report.ActionDelivered ||
			recv[len(recv)-1].Pod != f.ns+"/b" {
			t.Errorf("receiver observations %+v, want Received first and Delivered to %s/b last", recv, f.ns)
		}
		if !hasHop(recv, "ls_out_", labNodes[1].name, report.ComponentNetworkPolicy) && !hasHop(recv, "ls_out_", labNodes[1].name, report.ComponentForwarding) &&
			!hasHop(recv, "ls_out_", labNodes[1].name, report.ComponentLB) {
			t.Errorf("the receiver's hops are not named by the destination switch's egress stages: %+v", recv)
		}
	})
}

// Done-when 1, same node: a to c on tf-node-1, every protocol, Delivered to
// c by the sender alone, its hops named by the node switch's ingress and
// egress stages (OVN routes nothing between two pods of one switch); each
// verdict held to real traffic.
func TestTraceOVNSameNodeNamed(t *testing.T) {
	f := getTraceFixture(t)
	eachProtocolDelivered(t, f, "c", func(t *testing.T, r traceRun) {
		obs := observations(t, r, labNodes[0].name)
		if o := obs[len(obs)-1]; o.Action != report.ActionDelivered || o.Pod != f.ns+"/c" || !strings.HasSuffix(o.ComponentInfo, "("+labNodes[0].name+")") {
			t.Errorf("last observation %+v, want Delivered to %s/c on the node switch %s", o, f.ns, labNodes[0].name)
		}
		if !hasHop(obs, "ls_in_", labNodes[0].name, report.ComponentForwarding) || !hasHop(obs, "ls_out_", labNodes[0].name, report.ComponentForwarding) {
			t.Errorf("the hops are not named by the node switch's ingress and egress stages: %+v", obs)
		}
		for _, o := range obs {
			if strings.Contains(o.ComponentInfo, "ovn_cluster_router") {
				t.Errorf("hop %+v on the router: two pods of one switch are not routed", o)
			}
		}
	})
}

// Done-when 2: an ingress policy drops on the receiving node at ls_out_acl
// (ls_out_acl_action from OVN 23.06 on, where ls_out_acl_eval holds the ACLs),
// and an egress policy on the sending node at ls_in_acl_after_lb (egress
// ACLs apply after the load balancer, as OVN-Kubernetes writes them); both
// name the NetworkPolicy.
func TestTraceOVNPolicyDrops(t *testing.T) {
	f := getTraceFixture(t)
	t.Run("ingress", func(t *testing.T) {
		r, _ := traceAndTraffic(t, probe{f.ns, "a", "tcp", f.pods["locked"].Status.PodIP, 80}, "", "-n", f.ns, "a", "locked", "--tcp", "80")
		drop := last(r.result(t, labNodes[1].name))
		if drop.Action != report.ActionDropped || drop.Component != report.ComponentNetworkPolicy ||
			!strings.HasPrefix(drop.ComponentInfo, "ls_out_acl") || drop.NetworkPolicy != f.ns+"/deny-locked" {
			t.Errorf("receiver's last observation %+v, want a NetworkPolicy drop at ls_out_acl* naming %s/deny-locked", drop, f.ns)
		}
		assertNothingLeft(t)
	})
	t.Run("egress", func(t *testing.T) {
		ns := namespace(t, "ovn-egress")
		apply(t, podSpec(ns, "out", labNodes[0].name, map[string]string{"app": "out"})+denyEgress(ns, "no-egress", "out"))
		waitPods(t, ns, "out")
		p := probe{ns, "out", "tcp", f.pods["b"].Status.PodIP, 80}
		waitTraffic(t, p, timedOut)
		r, _ := traceAndTraffic(t, p, "", "-n", ns, "out", f.ns+"/b", "--tcp", "80")
		drop := last(r.result(t, labNodes[0].name))
		if drop.Action != report.ActionDropped || drop.Component != report.ComponentNetworkPolicy ||
			!strings.HasPrefix(drop.ComponentInfo, "ls_in_acl_after_lb") || drop.NetworkPolicy != ns+"/no-egress" {
			t.Errorf("sender's last observation %+v, want a NetworkPolicy drop at ls_in_acl_after_lb* naming %s/no-egress", drop, ns)
		}
		assertNothingLeft(t)
	})
}

// Done-when 3: a ClusterIP Service with an endpoint on each node: the LB
// hop's translatedDstIP is the endpoint the probe was delivered to, and
// real traffic is served.
func TestTraceOVNServiceBothNodes(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "ovn-svc")
	apply(t, podSpec(ns, "client", labNodes[0].name, nil)+
		podSpec(ns, "ep1", labNodes[0].name, map[string]string{"app": "ep"})+
		podSpec(ns, "ep2", labNodes[1].name, map[string]string{"app": "ep"})+serviceSpec(ns, "ep", "ep", http80))
	pods := waitPods(t, ns, "client", "ep1", "ep2")
	clusterIP := strings.TrimSpace(mustKubectl(t, "get", "service", "-n", ns, "ep", "-o", "jsonpath={.spec.clusterIP}"))
	p := probe{ns, "client", "tcp", clusterIP, 80}
	waitTraffic(t, p, served)
	byIP := map[string]string{pods["ep1"].Status.PodIP: ns + "/ep1", pods["ep2"].Status.PodIP: ns + "/ep2"}
	reached := map[string]bool{}
	for i := 0; i < 4; i++ {
		r, _ := traceAndTraffic(t, p, "", "-n", ns, "client", "svc/ep", "--tcp", "80")
		var translated, delivered string
		for _, res := range r.record.Status.Results {
			for _, o := range res.Observations {
				if o.Component == report.ComponentLB && o.TranslatedDstIP != "" {
					translated = o.TranslatedDstIP
				}
				if o.Action == report.ActionDelivered {
					delivered = o.Pod
				}
			}
		}
		if translated == "" || byIP[translated] == "" || byIP[translated] != delivered {
			t.Errorf("trace %d: LB translated to %q, delivered to %q: want an endpoint's IP and delivery to that endpoint (%v)", i, translated, delivered, byIP)
		}
		reached[delivered] = true
	}
	t.Logf("endpoints reached: %v", reached)
	assertNothingLeft(t)
}

// Done-when 4: an IP in the pod range that no node's subnet holds: the
// router has no route for it.
func TestTraceOVNNoRoute(t *testing.T) {
	f := getTraceFixture(t)
	const nowhere = "10.244.200.9"
	r, _ := traceAndTraffic(t, probe{f.ns, "a", "tcp", nowhere, 80}, "", "-n", f.ns, "a", nowhere, "--tcp", "80")
	drop := last(r.result(t, labNodes[0].name))
	if drop.Action != report.ActionDropped || drop.Component != report.ComponentRouting || !strings.HasPrefix(drop.ComponentInfo, "lr_in_ip_routing ") {
		t.Errorf("last observation %+v, want Dropped by Routing at lr_in_ip_routing", drop)
	}
	assertNothingLeft(t)
}

// Done-when 6: twenty traces leave no flow behind and do not disturb a
// request loop between two other pods (c to b).
//
// The loop is paced (a request a second, some 50 during the traces), not
// run flat out: the lab's OVS 3.1.0 (Debian 12, userspace datapath) has a
// conntrack bug that kills ovs-vswitchd under a flat-out request loop on
// OVN switches with load balancers, with no trace running at all
// (test/lab/ovs-conntrack-crash.sh; test/lab/README.md, OVN mode). Each new
// connection is a draw in that lottery; the test asks whether traces disturb
// forwarding, which a few dozen requests show as well as hundreds.
//
// The loop runs between other pods than the traced ones: run between the
// traced pods (a to b), it crashed tf-node-1's ovs-vswitchd in CI on
// 2026-12-02 with that very assertion (lib/conntrack.c:1063), the node's
// kubelet then out of reach, every later trace failing. The traces'
// verdicts are held to real traffic between a and b once, after the loop,
// as every other trace test holds its own (checkAgainstTraffic); OVS 4.0
// carries the fix (issue 22's fixture).
func TestTraceOVNUndisturbed(t *testing.T) {
	f := getTraceFixture(t)
	var stop atomic.Bool
	var requests, failures atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for ; !stop.Load(); <-tick.C {
			out, err := execIn(f.ns, "c", "get", "-timeout", oracleTimeout, fmt.Sprintf("http://%s:80/", f.pods["b"].Status.PodIP))
			requests.Add(1)
			if err != nil || !strings.Contains(out, "result=served") {
				failures.Add(1)
				t.Logf("request loop: %v %s", err, out)
			}
		}
	})
	runs := make([]traceRun, 20)
	for i := range runs {
		runs[i] = runTrace(t, "-n", f.ns, "a", "b", "--tcp", "80")
	}
	stop.Store(true)
	wg.Wait()
	real := realTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80})
	for i, r := range runs {
		t.Run(fmt.Sprintf("trace-%d", i), func(t *testing.T) { checkAgainstTraffic(t, r, real, "") })
	}
	t.Logf("request loop c -> b: %d requests during 20 traces, %d failed", requests.Load(), failures.Load())
	if requests.Load() < 5 || failures.Load() != 0 {
		t.Errorf("request loop: %d requests, %d failures; want some and none failed", requests.Load(), failures.Load())
	}
	assertNothingLeft(t)
}

// Done-when 6b: with OVN's databases out of the helper's reach, the trace
// still ends with its verdict, and says why its hops carry table numbers.
func TestTraceOVNWithoutDatabases(t *testing.T) {
	f := getTraceFixture(t)
	r, _ := traceAndTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}, "", "-n", f.ns, "a", "b", "--tcp", "80", "--ovn-rundir", "/var/run/tflab-no-ovn")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	for _, res := range r.record.Status.Results {
		for _, o := range res.Observations {
			if strings.Contains(o.ComponentInfo, "_in_") || strings.Contains(o.ComponentInfo, "_out_") {
				t.Errorf("a hop named by OVN without OVN's databases: %+v", o)
			}
		}
	}
	// The plain output says why.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "traceflow", "-n", f.ns, "a", "b", "--tcp", "80", "--ovn-rundir", "/var/run/tflab-no-ovn")
	cmd.Env = kubectlEnv()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "southbound database cannot be read") || !strings.Contains(string(out), "table numbers only") {
		t.Errorf("the output does not say why hops carry table numbers:\n%s", out)
	}
	assertNothingLeft(t)
}
