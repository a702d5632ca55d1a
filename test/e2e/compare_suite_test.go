//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// The cases of Antrea's own e2e Traceflow suite (its test/e2e/
// traceflow_test.go, v2) that the lab's Antrea mode can run, added to the
// comparison where the first table had no case of their kind. The lab is
// IPv4, Geneve, Linux, with Egress and ServiceExternalIP off, so the suite's
// IPv6, Windows and Egress cases do not apply; its live-traffic cases are
// TestAntreaLive's, and its invalid requests (a missing source or
// destination pod, a host-network source) are refused by the plugin before
// either engine runs (resolve, TestTraceMissingPodCreatesNothing).
//
//   - testTraceflowIntraNodeANNP: an Antrea NetworkPolicy that drops, and one
//     that rejects, all ingress to a pod on the source's node (Antrea:
//     SpoofGuard, then NetworkPolicy IngressMetric Dropped / Rejected).
//   - testTraceflowIntraNode and testTraceflowInterNode: a Kubernetes
//     NetworkPolicy allowing all egress of every pod and one denying ingress
//     to some (Antrea: an EgressRule Forwarded hop naming the allow-all
//     policy on every path, IngressDefaultRule Dropped for the isolated
//     pods); destinations given as pod names and as bare pod IPs, over TCP,
//     UDP and ICMP; a Service whose port differs from its target port.
//   - localGatewayDestination: ICMP to the source node's gateway IP (Antrea:
//     Output Delivered).
//   - testTraceflowExternalIP: ICMP to the node's own IP (Antrea: Output
//     ForwardedOutOfOverlay, our ForwardedOutOfNetwork).
//
// Added beside them: a Service traced by its bare ClusterIP, and an address
// outside the cluster. What real traffic can prove for an address outside
// the cluster: the lab's nodes have no default route, so nothing answers
// from beyond the node; but the node's kernel answers the echo request with
// an ICMP network unreachable (code 0). Neither OVS nor Antrea sends that
// code (Antrea's Reject answers with administratively prohibited), so it
// proves that the packet left the pod network and reached the node's
// routing: what ForwardedOutOfNetwork says, and no more.
func suiteCases(tb testing.TB, f *traceFixture) ([]compareCase, func()) {
	tb.Helper()
	fns := f.ns
	ip := func(pod string) string { return f.pods[pod].Status.PodIP }
	gw := netip.MustParsePrefix(labNodes[0].podCIDR).Addr().Next().String()
	webIP := strings.TrimSpace(mustKubectl(tb, "get", "service", "-n", fns, "web", "-o", "jsonpath={.spec.clusterIP}"))

	// testTraceflowIntraNodeANNP, in the fixture's namespace (no policy
	// there selects these two pods but these).
	apply(tb, podSpec(fns, "annp-drop", labNodes[0].name, map[string]string{"app": "annp-drop"})+
		podSpec(fns, "annp-reject", labNodes[0].name, map[string]string{"app": "annp-reject"}))
	annp := waitPods(tb, fns, "annp-drop", "annp-reject")
	annps := fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: NetworkPolicy
metadata: {name: deny-all-ingress, namespace: %[1]s}
spec:
  priority: 250
  tier: application
  appliedTo: [{podSelector: {matchLabels: {app: annp-drop}}}]
  ingress: [{name: drop-all, action: Drop}]
---
apiVersion: crd.antrea.io/v1beta1
kind: NetworkPolicy
metadata: {name: reject-all-ingress, namespace: %[1]s}
spec:
  priority: 250
  tier: application
  appliedTo: [{podSelector: {matchLabels: {app: annp-reject}}}]
  ingress: [{name: reject-all, action: Reject}]
`, fns)
	applied := false
	withANNPs := func() {
		if !applied {
			apply(tb, annps)
			applied = true
		}
	}
	cleanup := func() {
		_, _ = kubectl(context.Background(), "delete", "networkpolicies.crd.antrea.io", "-n", fns, "deny-all-ingress", "reject-all-ingress", "--ignore-not-found")
	}

	// testTraceflowIntraNode and testTraceflowInterNode: a namespace of
	// their own, since allowing all egress would undo the fixture's
	// egress drop.
	ns := namespace(tb, "antrea-suite")
	apply(tb, podSpec(ns, "s0", labNodes[0].name, map[string]string{"app": "src"})+
		podSpec(ns, "s1", labNodes[0].name, map[string]string{"app": "deny"})+
		podSpec(ns, "s2", labNodes[0].name, map[string]string{"app": "dst"})+
		podSpec(ns, "r0", labNodes[1].name, map[string]string{"app": "backend"})+
		podSpec(ns, "r1", labNodes[1].name, map[string]string{"app": "deny"})+
		serviceSpec(ns, "echo", "backend", svcPort{name: "http", port: 80, target: 8080})+
		netpol{ns: ns, name: "allow-all-egress", types: []string{"Egress"}, egress: []string{"{}"}}.yaml()+
		denyIngress(ns, "deny-ingress", "deny"))
	sp := waitPods(tb, ns, "s0", "s1", "s2", "r0", "r1")
	sip := func(pod string) string { return sp[pod].Status.PodIP }
	echoIP := strings.TrimSpace(mustKubectl(tb, "get", "service", "-n", ns, "echo", "-o", "jsonpath={.spec.clusterIP}"))

	cases := []compareCase{
		// Destinations given as bare pod IPs (Antrea's ...DstIP... cases).
		{name: "pod IP, intra-node UDP", src: "a", dst: ip("c"), p: probe{fns, "a", "udp", ip("c"), 5000}},
		{name: "pod IP, intra-node ICMP", src: "a", dst: ip("c"), p: probe{fns, "a", "icmp", ip("c"), 0}},
		{name: "pod IP, inter-node UDP", src: "a", dst: ip("b"), p: probe{fns, "a", "udp", ip("b"), 5000}},
		{name: "Service by its ClusterIP", src: "a", dst: webIP, p: probe{fns, "a", "tcp", webIP, 80}},
		{name: "local gateway IP, ICMP", src: "a", dst: gw, p: probe{fns, "a", "icmp", gw, 0}},
		{name: "own node's IP, ICMP", src: "a", dst: labNodes[0].ip, p: probe{fns, "a", "icmp", labNodes[0].ip, 0}, leaves: true, want: served},
		{name: "outside the cluster, ICMP", src: "a", dst: "192.0.2.10", p: probe{fns, "a", "icmp", "192.0.2.10", 0}, leaves: true, want: refused,
			witness: `error="ICMP destination unreachable, code 0"`},
		{name: "ANNP drop all ingress (intra)", src: "a", dst: "annp-drop", p: probe{fns, "a", "tcp", annp["annp-drop"].Status.PodIP, 80}, before: withANNPs, want: timedOut},
		{name: "ANNP reject all ingress (intra)", src: "a", dst: "annp-reject", p: probe{fns, "a", "tcp", annp["annp-reject"].Status.PodIP, 80}, before: withANNPs, want: refused},
		// Allow-all egress and deny ingress (Kubernetes NetworkPolicies).
		{name: "K8s NP deny ingress, intra TCP", ns: ns, src: "s0", dst: "s1", p: probe{ns, "s0", "tcp", sip("s1"), 80}, want: timedOut},
		{name: "K8s NP allow egress, intra UDP", ns: ns, src: "s0", dst: "s2", p: probe{ns, "s0", "udp", sip("s2"), 5000}, want: served},
		{name: "K8s NP allow egress, pod IP ICMP", ns: ns, src: "s0", dst: sip("s2"), p: probe{ns, "s0", "icmp", sip("s2"), 0}, want: served},
		{name: "K8s NP allow egress, inter TCP", ns: ns, src: "s0", dst: "r0", p: probe{ns, "s0", "tcp", sip("r0"), 8080}, want: served},
		{name: "K8s NP allow egress, inter UDP IP", ns: ns, src: "s0", dst: sip("r0"), p: probe{ns, "s0", "udp", sip("r0"), 5000}, want: served},
		{name: "K8s NP deny ingress, inter ICMP", ns: ns, src: "s0", dst: "r1", p: probe{ns, "s0", "icmp", sip("r1"), 0}, want: timedOut},
		{name: "K8s NP, Service 80 -> 8080", ns: ns, src: "s0", dst: "svc/echo", p: probe{ns, "s0", "tcp", echoIP, 80}, want: served},
	}
	return cases, cleanup
}
