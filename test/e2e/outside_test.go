//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Issue 26, done-when 5: from outside the cluster to a NodePort on either
// node and to an externalIP, on the genuine OVN-Kubernetes, whose gateway
// routers implement them (its breth0 flows send a NodePort's and an
// externalIP's packets from the uplink into OVN), and on the genuine
// Antrea with proxyAll, whose proxy implements them behind the node's
// kernel (iptables DNAT a NodePort to its virtual address, routes send
// that and an externalIP into OVS through antrea-gw0). The lab's host
// (10.89.0.1, on the nodes' underlay) is the outside: real traffic is the
// workload client run there, and each trace from it (a round trip) must
// say what that traffic met: served means the endpoint reached and the
// answer back out through the node's uplink, refused the node's own
// answer, a Service without endpoints rejected where the gateway router
// rejects it.
//
// The endpoint (b, on node 2, serving TCP 80 and 8080 and UDP 5000) is the
// test's own, in a namespace of its own: Antrea v2.3.2 keeps one hairpin
// flow per local endpoint address (SNATMark, nw_src=nw_dst=EP) but counts
// an endpoint's references by address, port and protocol, so deleting a
// Service whose port is the endpoint's only user removes the hairpin flow
// every other Service of that pod needs, for good (measured: the shared
// fixture's b could no longer reach itself through svc/web, and both its
// real traffic and the trace said so).
func TestOutsideToNodePortAndExternalIP(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "outside")
	apply(t, podSpec(ns, "b", labNodes[1].name, map[string]string{"app": "web"}))
	waitPods(t, ns, "b")
	const extIP, lbIP = "10.89.0.50", "10.89.0.60"
	apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: outside-web, namespace: %[1]s}
spec:
  type: NodePort
  selector: {app: web}
  externalIPs: [%[2]s]
  ports: [{name: http, port: 80, targetPort: 80}, {name: echo, port: 5000, targetPort: 5000, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: outside-empty, namespace: %[1]s}
spec:
  type: NodePort
  selector: {app: nothing-selects-this}
  ports: [{port: 80, targetPort: 80}]
---
`, ns, extIP))
	// A LoadBalancer's address is what a cloud's controller writes in its
	// status; the lab has none, so the test writes it (10.89.0.60).
	apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: outside-lb, namespace: %s}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{port: 8080, targetPort: 8080}]
---
`, ns))
	// Another Service with the same externalIP makes ovnkube fail the
	// newer one whole (its nftables map refuses the duplicate element,
	// "File exists"), NodePorts included: none is left for a rerun.
	t.Cleanup(func() {
		_, _ = kubectl(context.Background(), "delete", "service", "-n", ns, "outside-web", "outside-empty", "outside-lb", "--wait=false")
	})
	mustKubectl(t, "patch", "service", "-n", ns, "outside-lb", "--subresource=status", "--type=merge",
		"-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"`+lbIP+`"}]}}}`)
	web, echo := nodePort(t, ns, "outside-web", 0), nodePort(t, ns, "outside-web", 1)
	empty := nodePort(t, ns, "outside-empty", 0)
	// The lab's host reaches the externalIP through node 1's uplink.
	hostRoute(t, extIP, labNodes[0].ip)
	hostRoute(t, lbIP, labNodes[1].ip)
	for _, tc := range []struct {
		name, dst, proto, target string
		port                     int
		via                      string
		want                     outcome
	}{
		{"NodePort on node 1, endpoint on node 2", "node/" + labNodes[0].name, "tcp", labNodes[0].ip, web, "", served},
		{"NodePort on node 2, endpoint on it", "node/" + labNodes[1].name, "tcp", labNodes[1].ip, web, "", served},
		{"UDP NodePort on node 1", "node/" + labNodes[0].name, "udp", labNodes[0].ip, echo, "", served},
		{"externalIP via node 1", extIP, "tcp", extIP, 80, labNodes[0].name, served},
		{"LoadBalancer IP via node 2", lbIP, "tcp", lbIP, 8080, labNodes[1].name, served},
		{"NodePort of a Service without endpoints", "node/" + labNodes[0].name, "tcp", labNodes[0].ip, empty, "", refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := probe{proto: tc.proto, dst: tc.target, port: tc.port}
			// ovnkube programs a new Service's NodePort and externalIP
			// (breth0's flows, the gateway routers' load balancers) a
			// moment after the API has it: traced once real traffic
			// meets what it will meet.
			eventually(t, 30*time.Second, fmt.Sprintf("real traffic from outside %+v to be %s", p, tc.want), func() error {
				if got := outsideTraffic(t, p); got != tc.want {
					return fmt.Errorf("it is %s", got)
				}
				return nil
			})
			args := []string{labHostIP, tc.dst, "--" + tc.proto, strconv.Itoa(tc.port), "--round-trip"}
			if tc.via != "" {
				args = append(args, "--via", "node/"+tc.via)
			}
			r := runTrace(t, args...)
			real := outsideTraffic(t, p)
			if real != tc.want {
				t.Fatalf("real traffic from the lab's host to %s %s/%d: %s, want %s", tc.target, tc.proto, tc.port, real, tc.want)
			}
			checkAgainstTraffic(t, r, real, "")
			if r.record == nil {
				t.Fatalf("no record:\n%s", r.stderr)
			}
			wantReply := map[outcome]string{served: "Answered", refused: ""}[real]
			if got := r.record.Annotations[labels.ReplyAnnotation]; got != wantReply {
				t.Errorf("answer %q, want %q (real traffic %s)\n%s", got, wantReply, real, r.stderr)
			}
			via := tc.via
			if via == "" {
				via = strings.TrimPrefix(tc.dst, "node/")
			}
			if got := r.record.Annotations[labels.ViaAnnotation]; got != via {
				t.Errorf("via annotation %q, want %q", got, via)
			}
			if real == served && !answerLeftBy(r, via) {
				t.Errorf("the answer's hops on %s do not end leaving the pod network (its uplink)", via)
			}
		})
	}
	t.Run("check suite", func(t *testing.T) { checkSuiteBeyondPods(t, ns, web, empty, lbIP) })
	assertNothingLeft(t)
}

// checkSuiteBeyondPods runs a check suite whose cases start at a node and
// outside the cluster (issue 26, done-when 6), with the Services
// TestOutsideToNodePortAndExternalIP made and real traffic already
// checked: the NodePort and the LoadBalancer IP answer, the node reaches
// pod b, and the NodePort of the Service without endpoints, stated as
// delivered, fails with a JUnit failure that names the forward way and
// the node where the dataplane answered in the endpoint's stead.
func checkSuiteBeyondPods(t *testing.T, ns string, web, empty int, lbIP string) {
	junit := filepath.Join(t.TempDir(), "junit.xml")
	r := runCheck(t, fmt.Sprintf(`apiVersion: traceflow.kubectl-traceflow.io/v1alpha1
kind: CheckSuite
defaults: {namespace: %[1]s, roundTrip: true}
cases:
- {name: the NodePort answers on node 1, from: {ip: %[2]s}, to: {node: %[3]s}, port: %[5]d}
- {name: the LoadBalancer IP answers via node 2, from: {ip: %[2]s, via: node/%[4]s}, to: {ip: %[7]s}, port: 8080}
- {name: node 2 reaches b, from: {node: %[4]s}, to: {pod: b}, port: 80}
- {name: the empty NodePort answers (it does not), from: {ip: %[2]s}, to: {node: %[3]s}, port: %[6]d}
`, ns, labHostIP, labNodes[0].name, labNodes[1].name, web, empty, lbIP), "-f", "-", "--junit", junit)
	if r.code != 2 || len(r.cases) != 4 {
		t.Fatalf("exit %d with %d results, want 2 with 4", r.code, len(r.cases))
	}
	for _, c := range r.cases {
		if c.Passed != (c.Case != "the empty NodePort answers (it does not)") {
			t.Errorf("case %q passed=%v: want only the empty NodePort's to fail (%s)", c.Case, c.Passed, c.Message)
		}
	}
	xml := validateJUnit(t, junit)
	t.Logf("JUnit report:\n%s", xml)
	// Where the Service without endpoints is rejected: OVN-Kubernetes'
	// gateway router's load balancer, Antrea's proxy's EndpointDNAT table.
	table := map[string]string{modeOVNK: "lr_in_dnat", modeAntrea: "EndpointDNAT"}[labMode()]
	for _, want := range []string{`type="Rejected"`, "forward: ", "rejected on " + labNodes[0].name + " by table " + table} {
		if !strings.Contains(xml, want) {
			t.Errorf("the JUnit failure does not say %q", want)
		}
	}
}

// TestOutsideLeavesRealConnectionsAlone: round trips from outside to a
// NodePort leave the real connections from the same host to it alone (a
// loop of real requests, each on a connection of its own, during 10 round
// trips through each node, has no failure).
//
// The endpoint is the test's own: measured without any trace, two such
// loops through two NodePorts of one endpoint, side by side for 60 s,
// failed 79 of 2901 requests, one loop alone none. Our reading: the
// gateway router SNATs a packet from outside to its own address and keeps
// the client's port, so the two loops' connections meet as one tuple at
// the endpoint, which fails the second while it holds the first in
// TIME_WAIT.
func TestOutsideLeavesRealConnectionsAlone(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "outside-soak")
	apply(t, podSpec(ns, "b", labNodes[1].name, map[string]string{"app": "outside-soak"}))
	waitPods(t, ns, "b")
	port := nodePortService(t, ns, "outside-soak", "outside-soak")
	// Each node's ovnkube programs the NodePort on its own gateway router:
	// the traces through a node start once real traffic through it is
	// served.
	for _, n := range labNodes {
		eventually(t, 30*time.Second, "real traffic from outside to the NodePort on "+n.name+" to be served", func() error {
			if got := outsideTraffic(t, probe{proto: "tcp", dst: n.ip, port: port}); got != served {
				return fmt.Errorf("it is %s", got)
			}
			return nil
		})
	}
	p := probe{proto: "tcp", dst: labNodes[0].ip, port: port}
	stop := startSoak(t, nil, filepath.Join(repoRoot(), "bin", "lab", "workload"), "soak", "-timeout", oracleTimeout, fmt.Sprintf("http://%s:%d/", p.dst, port))
	for i := range 10 {
		for _, n := range labNodes {
			logWindow(t, fmt.Sprintf("round trip %d via %s", i, n.name), func() {
				r := runTrace(t, labHostIP, "node/"+n.name, "--tcp", strconv.Itoa(port), "--round-trip")
				if r.code != 0 {
					t.Errorf("round trip %d via %s: exit %d, want 0 (answered)", i, n.name, r.code)
				}
			})
		}
	}
	stop(20)
	assertNothingLeft(t)
}

// TestOutsideBadInput: a source outside the cluster reaches only a
// NodePort, an externalIP or a LoadBalancer IP, through a node that
// exists; anything else is refused with exit 1 and a message that says
// what to do, before anything is created. Every mode: the checks are the
// plugin's.
func TestOutsideBadInput(t *testing.T) {
	f := getTraceFixture(t)
	apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: outside-bad-input, namespace: %s}
spec:
  type: NodePort
  selector: {app: web}
  externalIPs: [10.89.0.51]
  ports: [{port: 80, targetPort: 80}]
---
`, f.ns))
	t.Cleanup(func() {
		_, _ = kubectl(context.Background(), "delete", "service", "-n", f.ns, "outside-bad-input", "--wait=false")
	})
	np := strconv.Itoa(nodePort(t, f.ns, "outside-bad-input", 0))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"to a pod", []string{labHostIP, f.ns + "/b", "--tcp", "80"}, "reaches a Service through a NodePort"},
		{"to a Service", []string{labHostIP, f.ns + "/svc/web", "--tcp", "80"}, "reaches a Service through a NodePort"},
		{"to a port that is no NodePort", []string{labHostIP, "node/" + labNodes[0].name, "--tcp", "29999"}, "no Service has TCP NodePort 29999"},
		{"to an address that is no Service's", []string{labHostIP, "10.89.0.98", "--tcp", "80", "--via", "node/" + labNodes[0].name}, "no node's address and no Service's externalIP"},
		{"externalIP without --via", []string{labHostIP, "10.89.0.51", "--tcp", "80"}, "--via node/NAME"},
		{"via a node that does not exist", []string{labHostIP, "10.89.0.51", "--tcp", "80", "--via", "node/no-such-node"}, "no such node"},
		{"ICMP", []string{labHostIP, "node/" + labNodes[0].name, "--icmp"}, "give --tcp PORT or --udp PORT"},
		{"from a pod's address", []string{f.pods["a"].Status.PodIP, "node/" + labNodes[0].name, "--tcp", np}, "give the pod as SRC"},
		{"--via with a pod as SRC", []string{"-n", f.ns, "a", "b", "--via", "node/" + labNodes[1].name}, "drop --via"},
		{"--via to another node than the NodePort's", []string{labHostIP, "node/" + labNodes[0].name, "--tcp", np, "--via", "node/" + labNodes[1].name}, "arrives on node " + labNodes[0].name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runTrace(t, tc.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want 1 with %q:\n%s", r.code, tc.want, r.stderr)
			}
		})
	}
	assertNothingLeft(t)
}

// answerLeftBy reports whether the answer's hops on node end leaving the
// pod network: back out of the node's uplink towards the outside source.
func answerLeftBy(r traceRun, node string) bool {
	for _, res := range r.record.Status.Results {
		if res.Node == node && res.Role == report.RoleReply && len(res.Observations) > 0 {
			return res.Observations[len(res.Observations)-1].Action.Normalize() == report.ActionForwardedOutOfNetwork
		}
	}
	return false
}

// nodePort is the NodePort the API server gave port i of Service ns/name.
func nodePort(t testing.TB, ns, name string, i int) int {
	t.Helper()
	out := mustKubectl(t, "get", "service", "-n", ns, name, "-o", fmt.Sprintf("jsonpath={.spec.ports[%d].nodePort}", i))
	p, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || p == 0 {
		t.Fatalf("Service %s/%s port %d has no NodePort: %q", ns, name, i, out)
	}
	return p
}

// hostRoute routes dst from the lab's host through a node (as an outside
// router would send an externalIP to the node that announces it), until
// the test ends.
func hostRoute(t testing.TB, dst, via string) {
	t.Helper()
	if out, err := exec.Command("ip", "route", "replace", dst+"/32", "via", via).CombinedOutput(); err != nil {
		t.Fatalf("ip route replace %s via %s: %v: %s", dst, via, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "route", "del", dst+"/32").Run() })
}

// outsideTraffic sends p's traffic from the lab's host, outside the
// cluster, with the workload client.
func outsideTraffic(t testing.TB, p probe) outcome {
	t.Helper()
	got, _, _ := runWorkload(t, p, nil, filepath.Join(repoRoot(), "bin", "lab", "workload"), workloadArgs(t, p)...)
	return got
}

// TestOutsideWhereNoUplinkBridge: where a node's uplink is not bridged
// into the pipeline (the lab's and ovn modes' br-phy carries only the
// tunnel, and the node's address is on its own port), a packet from
// outside meets the node's kernel first, and nothing there implements a
// NodePort (no kube-proxy runs, and neither mode's dataplane has one):
// the helper sends the probe into the node's stack as the outside's
// packet arrives, sees the kernel take it for itself, and says so; the
// trace fails (exit 4) without a verdict it could not know (what the
// kernel does with it is out of OVS's sight), and real traffic is refused
// by the node's kernel.
func TestOutsideWhereNoUplinkBridge(t *testing.T) {
	f := getTraceFixture(t)
	port := nodePortService(t, f.ns, "outside-unbridged", "web")
	r := runTrace(t, labHostIP, "node/"+labNodes[0].name, "--tcp", strconv.Itoa(port))
	if r.code != 4 || !strings.Contains(r.stderr, "the probe went into the node's own stack") {
		t.Errorf("exit %d, want 4 saying the probe went into the node's own stack and what the helper saw of it:\n%s", r.code, r.stderr)
	}
	if real := outsideTraffic(t, probe{proto: "tcp", dst: labNodes[0].ip, port: port}); real != refused {
		t.Errorf("real traffic from the lab's host to the NodePort: %s, want refused (nothing implements it here)", real)
	}
	assertNothingLeft(t)
}

// nodePortService makes a NodePort Service of the pods labelled app=APP
// on port 80, deleted when the test ends, and returns its NodePort.
func nodePortService(t *testing.T, ns, name, app string) int {
	t.Helper()
	apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  type: NodePort
  selector: {app: %s}
  ports: [{port: 80, targetPort: 80}]
---
`, name, ns, app))
	t.Cleanup(func() {
		_, _ = kubectl(context.Background(), "delete", "service", "-n", ns, name, "--wait=false")
	})
	return nodePort(t, ns, name, 0)
}
