//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Real traffic in every lab mode: pod to pod on one node and across nodes,
// over TCP (80 and 8080), UDP and ICMP echo, and a pod reaching itself
// through its own Service (hairpin). The workload's own clients judge each
// flow (served, refused or timed out), as they judge every trace's verdict.
func TestTrafficWithinAndAcrossNodes(t *testing.T) {
	w := getWeb(t)
	// client and srv-1 share node 1; srv-2 is on node 2.
	for _, dst := range []string{"srv-1", "srv-2"} {
		ip := w.pods[dst].Status.PodIP
		for _, p := range []probe{
			{w.ns, "client", "tcp", ip, 80},
			{w.ns, "client", "tcp", ip, 8080},
			{w.ns, "client", "udp", ip, 5000},
			{w.ns, "client", "icmp", ip, 0},
		} {
			t.Run(fmt.Sprintf("%s/%s-%d", dst, p.proto, p.port), func(t *testing.T) {
				waitTraffic(t, p, served)
			})
		}
	}
}

// A ClusterIP Service whose only endpoint is the pod that calls it: the
// dataplane must send the packet back to where it came from (Antrea's e2e
// suite and OVN-Kubernetes' both test it).
func TestTrafficHairpinThroughService(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "hairpin-traffic")
	_, vip := selfService(t, ns)
	waitTraffic(t, probe{ns, "self", "tcp", vip, 80}, served)
	waitTraffic(t, probe{ns, "self", "udp", vip, 5000}, served)
}

// selfService starts pod "self" on node 2 behind a ClusterIP Service
// "self" (TCP 80, UDP 5000) whose only endpoint it is, and returns the pod
// and the Service's IP.
func selfService(t testing.TB, ns string) (*corev1.Pod, string) {
	t.Helper()
	apply(t, podSpec(ns, "self", labNodes[1].name, map[string]string{"app": "self"})+
		serviceSpec(ns, "self", "self", http80, svcPort{name: "udp", port: 5000, target: 5000, protocol: "UDP"}))
	pods := waitPods(t, ns, "self")
	return pods["self"], strings.TrimSpace(mustKubectl(t, "get", "service", "-n", ns, "self", "-o", "jsonpath={.spec.clusterIP}"))
}

// podIPs are the pods' addresses by name.
func podIPs(pods map[string]*corev1.Pod) map[string]string {
	ips := map[string]string{}
	for name, p := range pods {
		ips[name] = p.Status.PodIP
	}
	return ips
}
