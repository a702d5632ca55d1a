//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Issue 26, done-when 3: a node (node/NAME) and a host-network pod as
// sources, in every mode. Each verdict is held to the same flow as real
// traffic: the workload client in the host-network pod, or run by the node
// itself in its own network namespace. d is isolated by a NetworkPolicy
// without ingress rules and has an HTTP readiness probe, which its kubelet
// sends from its node every second: the trace of d's own node to d must
// say what those probes meet (counted in d's log during the traces).
// OVN-Kubernetes and the lab's agents let a node's own traffic through to
// its pods whatever the policies say; Antrea on Linux does so by a mark
// the host's iptables put on the node's packets, which the lab's userspace
// datapath does not carry into OVS, so there the probes are dropped, d
// never gets Ready, and the trace must say Dropped.
func TestNodeAndHostNetworkSources(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "node-src")
	hostPod := strings.Replace(podSpec(ns, "h", labNodes[0].name, map[string]string{"app": "h"}), "spec:\n", "spec:\n  hostNetwork: true\n", 1)
	probed := strings.Replace(podSpec(ns, "d", labNodes[1].name, map[string]string{"app": "d"}), "    imagePullPolicy: Never\n",
		"    imagePullPolicy: Never\n    readinessProbe: {httpGet: {port: 80, path: /ready}, periodSeconds: 1}\n", 1)
	apply(t, podSpec(ns, "a", labNodes[0].name, map[string]string{"app": "a"})+
		podSpec(ns, "b", labNodes[1].name, map[string]string{"app": "b"})+probed+hostPod+
		denyIngress(ns, "deny-d", "d"))
	pods := waitPods(t, ns, "a", "b", "h")
	pods["d"] = waitStarted(t, ns, "d")
	probesBefore := probesServed(t, ns, "d")
	var probeVerdict report.Action
	ip := func(pod string) string { return pods[pod].Status.PodIP }
	node1, node2 := labNodes[0], labNodes[1]

	for _, tc := range []struct {
		name string
		src  string // the plugin's SRC: node/NAME, or the host-network pod
		dst  string // the plugin's DST
		from string // the node that sends the real traffic, or "" for p.pod
		p    probe
	}{
		{"node to a pod on another node, TCP", "node/" + node1.name, "b", node1.name, probe{ns, "", "tcp", ip("b"), 80}},
		{"node to a pod on another node, UDP", "node/" + node1.name, "b", node1.name, probe{ns, "", "udp", ip("b"), 5000}},
		{"node to its own pod, TCP", "node/" + node1.name, "a", node1.name, probe{ns, "", "tcp", ip("a"), 80}},
		{"node to its own pod, ICMP", "node/" + node1.name, "a", node1.name, probe{ns, "", "icmp", ip("a"), 0}},
		{"host-network pod to a pod on another node, TCP", "h", "b", "", probe{ns, "h", "tcp", ip("b"), 80}},
		{"node to its own isolated pod, as the kubelet probes", "node/" + node2.name, "d", node2.name, probe{ns, "", "tcp", ip("d"), 80}},
		{"node to another node's isolated pod", "node/" + node1.name, "d", node1.name, probe{ns, "", "tcp", ip("d"), 80}},
		{"host-network pod to another node's isolated pod", "h", "d", "", probe{ns, "h", "tcp", ip("d"), 80}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runTrace(t, append([]string{"-n", ns, tc.src, tc.dst}, protoArgs(tc.p)...)...)
			real, sender := outcome(""), tc.from
			if tc.from != "" {
				real = nodeTraffic(t, tc.from, tc.p)
			} else {
				real, sender = realTraffic(t, tc.p), node1.name
			}
			checkAgainstTraffic(t, r, real, "")
			if acts := terminalActions(r); strings.HasSuffix(tc.name, "as the kubelet probes") && len(acts) == 1 {
				probeVerdict = acts[0]
			}
			if first := r.result(t, sender); len(first.Observations) == 0 {
				t.Errorf("no hop on %s, where the node's probe entered the bridge", sender)
			}
			assertNothingLeft(t)
		})
	}
	// The kubelet's own probes of d (every second) met what the node's
	// trace met.
	after := probesServed(t, ns, "d")
	t.Logf("pod d served %d readiness probes before the traces, %d after; the node's trace said %s", probesBefore, after, probeVerdict)
	if (after > probesBefore) != (probeVerdict == report.ActionDelivered) {
		t.Errorf("pod d served %d readiness probes before the traces and %d after, and the trace of its node's traffic said %s: they disagree", probesBefore, after, probeVerdict)
	}
}

// Issue 22, done-when 4: on the genuine OVN-Kubernetes, a pod's traffic to
// the other node's address and to the lab's host outside the cluster,
// held to real traffic.
func TestOVNKNodeAndOutside(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "ovnk-node")
	apply(t, podSpec(ns, "a", labNodes[0].name, map[string]string{"app": "a"}))
	waitPods(t, ns, "a")
	node1, node2 := labNodes[0], labNodes[1]

	// A pod's traffic that leaves the pod network: its gateway router
	// translates the source to the node's address on the way out.
	for _, tc := range []struct {
		name, dst string
		p         probe
	}{
		{"pod to the other node's IP", "node/" + node2.name, probe{ns, "a", "icmp", node2.ip, 0}},
		{"pod to the lab's host outside the cluster", labHostIP, probe{ns, "a", "icmp", labHostIP, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The gateway router learns its next hop's MAC from the first
			// packet's ARP; until then ovn-controller holds packets, out
			// of OVS's sight, and the helper says so (an Incomplete trace,
			// tracer.IsNextHopResolution). A node that has talked to its
			// next hop knows it: real traffic first.
			waitTraffic(t, tc.p, served)
			r := runTrace(t, "-n", ns, "a", tc.dst, "--icmp")
			real := realTraffic(t, tc.p)
			checkLeftAgainstTraffic(t, r, real)
			res := r.result(t, node1.name)
			if !translatesSource(res, node1.ip) {
				t.Errorf("no hop on %s says the source became the node's address %s (the gateway router's SNAT); hops:\n%s", node1.name, node1.ip, hopLines(res))
			}
			assertNothingLeft(t)
		})
	}
}

// waitStarted waits for a pod's container to have started, Ready or not
// (a readiness probe a policy drops never makes it Ready).
func waitStarted(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	eventually(t, 90*time.Second, "pod "+ns+"/"+name+" started", func() error {
		p = getPod(t, ns, name)
		for _, c := range p.Status.ContainerStatuses {
			if c.Started != nil && *c.Started && p.Status.PodIP != "" {
				return nil
			}
		}
		return fmt.Errorf("phase %s", p.Status.Phase)
	})
	return p
}

// probesServed counts the readiness probes pod served (the workload logs
// each request it answers).
func probesServed(t testing.TB, ns, pod string) int {
	t.Helper()
	return strings.Count(mustKubectl(t, "logs", "-n", ns, pod), "http 80 /ready from ")
}

// checkLeftAgainstTraffic holds a trace to a destination outside the pod
// network to real traffic: where real traffic was served, the packet must
// have left the pod network (ForwardedOutOfNetwork, exit 0 under the
// default --expect delivered); anything else real traffic met is none of
// this test's cases and fails it.
func checkLeftAgainstTraffic(t testing.TB, r traceRun, real outcome) {
	t.Helper()
	if real != served {
		t.Fatalf("real traffic was %s; the case expects it served", real)
	}
	var ends []report.Action
	for _, res := range r.record.Status.Results {
		if o := last(res); o.Action != "" {
			ends = append(ends, o.Action)
		}
	}
	if !slices.Contains(ends, report.ActionForwardedOutOfNetwork) || slices.Contains(ends, report.ActionDropped) || slices.Contains(ends, report.ActionRejected) {
		t.Errorf("real traffic was served, so the packet must leave the pod network (%s) and nowhere be dropped; the nodes' last hops are %v", report.ActionForwardedOutOfNetwork, ends)
	}
	if r.code != 0 {
		t.Errorf("real traffic was served: exit %d, want 0\n%s", r.code, r.stderr)
	}
}

// translatesSource reports whether one of res's hops says the packet's
// source became ip.
func translatesSource(res report.NodeResult, ip string) bool {
	for _, o := range res.Observations {
		if o.TranslatedSrcIP == ip {
			return true
		}
	}
	return false
}

// hopLines renders res's hops one a line, for a failure message.
func hopLines(res report.NodeResult) string {
	var b strings.Builder
	for _, o := range res.Observations {
		b.WriteString("  " + string(o.Action) + " " + string(o.Component) + " " + o.ComponentInfo + " src->" + o.TranslatedSrcIP + " dst->" + o.TranslatedDstIP + "\n")
	}
	return b.String()
}
