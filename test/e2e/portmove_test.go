//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestRoundTripFromOnePortTwice: the same round trip through a Service of
// one endpoint, twice from one source port (--src-port, as a CI smoke check
// repeats it), both answered. The first's connection is still tracked
// (closing) when the second's DNAT commits: Antrea's pipeline (and the
// lab's) then gets the second probe another source port from conntrack,
// as it would a real client's, and the trace must say so, follow the
// probe to its delivery and the answer back; OVN's load balancer takes
// the closing connection up again and keeps the port. The oracle is the
// source node's conntrack: whether the probe's connection's answer comes
// back to another port. Found in Antrea's mode, where the second ended
// incomplete at the DNAT (and, with random ports, one round trip from
// outside in about 60).
func TestRoundTripFromOnePortTwice(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "port-twice")
	apply(t, podSpec(ns, "a", labNodes[0].name, nil)+podSpec(ns, "b", labNodes[1].name, map[string]string{"app": "port-twice"})+fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: one, namespace: %s}
spec:
  selector: {app: port-twice}
  ports: [{port: 80, targetPort: 80}]
`, ns))
	pods := waitPods(t, ns, "a", "b")
	clusterIP := strings.TrimSpace(mustKubectl(t, "get", "service", "-n", ns, "one", "-o", "jsonpath={.spec.clusterIP}"))
	const port = "62777"
	says := "conntrack moved the probe's source port from " + port + " to "
	for i := range 2 {
		r := runTrace(t, "-n", ns, "a", "svc/one", "--round-trip", "--src-port", port)
		if r.code != 0 {
			t.Fatalf("round trip %d: exit %d, want 0 (answered)", i, r.code)
		}
		checkRoundTrip(t, r, "Answered", ns+"/a", false)
		moved := answerPort(t, labNodes[0].name, pods["a"].Status.PodIP, clusterIP, port) != port
		said := false
		for _, res := range r.record.Status.Results {
			for _, o := range res.Observations {
				said = said || strings.Contains(o.ComponentInfo, says)
			}
		}
		t.Logf("round trip %d: conntrack moved the source port: %v; the trace says so: %v", i, moved, said)
		if said != moved {
			t.Errorf("round trip %d says %q: %v, but conntrack moved the port: %v", i, says, said, moved)
		}
		if i == 0 && moved {
			t.Errorf("round trip 0: conntrack moved a port no connection held")
		}
	}
	// The traces said answered: so does real traffic between the same
	// pods, through the same Service.
	if real := realTraffic(t, probe{ns, "a", "tcp", clusterIP, 80}); real != served {
		t.Errorf("real traffic from a to the Service: %s, the traces said answered", real)
	}
	assertNothingLeft(t)
}

// answerPort is the port the answer of the TCP connection from src:port to
// dst:80 comes back to, as node's OVS conntrack tracks it.
func answerPort(t *testing.T, node, src, dst, port string) string {
	t.Helper()
	orig := fmt.Sprintf("orig=(src=%s,dst=%s,sport=%s,dport=80)", src, dst, port)
	for _, l := range strings.Split(nodeExec(t, node, "ovs-appctl", "dpctl/dump-conntrack"), "\n") {
		if strings.HasPrefix(l, "tcp,") && strings.Contains(l, orig) {
			if m := replyDport.FindStringSubmatch(l); m != nil {
				return m[1]
			}
		}
	}
	t.Fatalf("%s's conntrack holds no connection %s", node, orig)
	return ""
}

var replyDport = regexp.MustCompile(`reply=\([^)]*,dport=(\d+)\)`)
