package check

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// A source or destination beyond pods reads as a single trace's SRC, DST
// and --via: a node by name (or node/NAME), an address outside the
// cluster with the node whose uplink receives it; neither takes the
// defaults' namespace.
func TestParseNodesAndOutside(t *testing.T) {
	at := func(line int) Pos { return Pos{"n.yaml", line} }
	for _, tc := range []struct {
		name, body string
		from       From
		to         To
		proto      traceflow.Protocol
		port       int32
	}{
		{"a node's own traffic to a pod", "  from: {node: worker-1}\n  to: {pod: api-1}\n  port: 80\n",
			From{Node: "worker-1", Pick: PickFirst, At: at(6)}, To{Namespace: "shop", Pod: "api-1", At: at(7)}, traceflow.TCP, 80},
		{"a node written node/NAME, to another node", "  from: {node: node/worker-1}\n  to: {node: Node/worker-2}\n",
			From{Node: "worker-1", Pick: PickFirst, At: at(6)}, To{Node: "worker-2", At: at(7)}, traceflow.ICMP, 0},
		{"a pod to a node's port", "  from: {pod: front-a}\n  to: {node: worker-2}\n  port: 10250\n",
			From{Namespace: "shop", Pod: "front-a", Pick: PickFirst, At: at(6)}, To{Node: "worker-2", At: at(7)}, traceflow.TCP, 10250},
		{"outside to a NodePort, via left to the destination node", "  from: {ip: 203.0.113.7}\n  to: {node: worker-1}\n  port: 30080\n",
			From{IP: "203.0.113.7", Pick: PickFirst, At: at(6)}, To{Node: "worker-1", At: at(7)}, traceflow.TCP, 30080},
		{"outside to a NodePort, via the same node", "  from:\n    ip: 203.0.113.7\n    via: worker-1\n  to: {node: worker-1}\n  protocol: udp\n  port: 30053\n",
			From{IP: "203.0.113.7", Via: "worker-1", Pick: PickFirst, At: at(7), ViaAt: at(8)}, To{Node: "worker-1", At: at(9)}, traceflow.UDP, 30053},
		{"outside to an externalIP, via node/NAME", "  from: {ip: 203.0.113.7, via: node/worker-2}\n  to: {ip: 192.0.2.10}\n  port: 443\n",
			From{IP: "203.0.113.7", Via: "worker-2", Pick: PickFirst, At: at(6), ViaAt: at(6)}, To{Namespace: "shop", IP: "192.0.2.10", At: at(7)}, traceflow.TCP, 443},
		{"via as Nodes/NAME", "  from: {ip: 203.0.113.7, via: Nodes/worker-2}\n  to: {ip: 192.0.2.10}\n  port: 443\n",
			From{IP: "203.0.113.7", Via: "worker-2", Pick: PickFirst, At: at(6), ViaAt: at(6)}, To{Namespace: "shop", IP: "192.0.2.10", At: at(7)}, traceflow.TCP, 443},
		{"an IPv6 address outside, as the parser writes it", "  from: {ip: 'FD00:0::7'}\n  to: {node: worker-1}\n  port: 30080\n",
			From{IP: "fd00::7", Pick: PickFirst, At: at(6)}, To{Node: "worker-1", At: at(7)}, traceflow.TCP, 30080},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("n.yaml", []byte(head+"defaults: {namespace: shop}\ncases:\n- name: a\n"+tc.body))
			if err != nil {
				t.Fatal(err)
			}
			c := s.Cases[0]
			if diff := cmp.Diff(tc.from, c.From); diff != "" {
				t.Errorf("from (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.to, c.To); diff != "" {
				t.Errorf("to (-want +got):\n%s", diff)
			}
			if c.Protocol != tc.proto || c.Port != tc.port {
				t.Errorf("packet %s %d, want %s %d", c.Protocol, c.Port, tc.proto, tc.port)
			}
		})
	}
}

// What the file alone shows to be wrong about a node or an outside source
// is refused with the file, the line and the field.
func TestParseBadNodesAndOutside(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		// want is the start of the error: file:line: field (case); says
		// is in it.
		want, says string
	}{
		{"a pod and a node", "  from: {pod: a, node: worker-1}\n  to: {pod: b}\n",
			`f.yaml:5: cases[0].from.node (case "a")`, "give only one of pod, selector, node and ip, not both pod and node"},
		{"a node and an ip", "  from: {node: worker-1, ip: 203.0.113.7}\n  to: {node: worker-2}\n  port: 30080\n",
			`f.yaml:5: cases[0].from.ip (case "a")`, "not both node and ip"},
		{"a selector and an ip", "  from: {selector: app=x, ip: 203.0.113.7}\n  to: {node: worker-2}\n  port: 30080\n",
			`f.yaml:5: cases[0].from.ip (case "a")`, "not both selector and ip"},
		{"no source", "  from: {namespace: shop}\n  to: {pod: b}\n",
			`f.yaml:5: cases[0].from (case "a")`, "give one of pod: NAME, selector: LABELS"},
		{"via with a node", "  from: {node: worker-1, via: worker-2}\n  to: {pod: b}\n",
			`f.yaml:5: cases[0].from.via (case "a")`, "goes with ip only"},
		{"via with a pod, on its own line", "  from:\n    pod: a\n    via: worker-2\n  to: {pod: b}\n",
			`f.yaml:7: cases[0].from.via (case "a")`, "goes with ip only"},
		{"via a pod", "  from: {ip: 203.0.113.7, via: pod/x}\n  to: {node: worker-1}\n  port: 30080\n",
			`f.yaml:5: cases[0].from.via (case "a")`, `"pod/x" is not a node: give the node's name`},
		{"via node/ and nothing", "  from: {ip: 203.0.113.7, via: node/}\n  to: {node: worker-1}\n  port: 30080\n",
			`f.yaml:5: cases[0].from.via (case "a")`, `"node/" is not a node name`},
		{"via no name", "  from: {ip: 203.0.113.7, via: Worker_1}\n  to: {node: worker-1}\n  port: 30080\n",
			`f.yaml:5: cases[0].from.via (case "a")`, `"Worker_1" is not a node name`},
		{"via not a string", "  from: {ip: 203.0.113.7, via: [worker-1]}\n  to: {node: worker-1}\n  port: 30080\n",
			`f.yaml:5: cases[0].from.via (case "a")`, "want a string, got a list"},
		{"an ip that is no IP", "  from: {ip: 203.0.113.300}\n  to: {node: worker-1}\n  port: 30080\n",
			`f.yaml:5: cases[0].from.ip (case "a")`, `"203.0.113.300" is not an IP address`},
		{"an ip that is a name", "  from:\n    ip: gateway\n  to: {node: worker-1}\n  port: 30080\n",
			`f.yaml:6: cases[0].from.ip (case "a")`, `"gateway" is not an IP address`},
		{"a node name that is none", "  from: {node: worker_1}\n  to: {pod: b}\n",
			`f.yaml:5: cases[0].from.node (case "a")`, `"worker_1" is not a node name`},
		{"a namespace with a node", "  from:\n    node: worker-1\n    namespace: shop\n  to: {pod: b}\n",
			`f.yaml:7: cases[0].from.namespace (case "a")`, "a node has no namespace: drop namespace"},
		{"a namespace with an ip", "  from: {ip: 203.0.113.7, namespace: shop}\n  to: {node: worker-1}\n  port: 30080\n",
			`f.yaml:5: cases[0].from.namespace (case "a")`, "an address outside the cluster has no namespace"},
		{"pods with a node", "  from: {node: worker-1, pods: all}\n  to: {pod: b}\n",
			`f.yaml:5: cases[0].from.pods (case "a")`, "applies to a selector only"},
		{"a namespace with a destination node", "  from: {pod: a}\n  to: {node: worker-1, namespace: shop}\n",
			`f.yaml:6: cases[0].to.namespace (case "a")`, "a node has no namespace"},
		{"a Service and a node", "  from: {pod: a}\n  to: {service: web, node: worker-1}\n",
			`f.yaml:6: cases[0].to.node (case "a")`, "give only one of pod, selector, service, ip and node, not both service and node"},
		{"a destination node that is none", "  from: {pod: a}\n  to: {node: 'worker 1'}\n",
			`f.yaml:6: cases[0].to.node (case "a")`, `"worker 1" is not a node name`},
		{"allEndpoints to a node", "  from: {pod: a}\n  to: {node: worker-1, allEndpoints: true}\n",
			`f.yaml:6: cases[0].to.allEndpoints (case "a")`, "service destination only"},
		{"a node to itself", "  from: {node: worker-1}\n  to:\n    node: node/worker-1\n",
			`f.yaml:7: cases[0].to.node (case "a")`, "the source and the destination are the same node worker-1"},
		{"from outside to a pod", "  from: {ip: 203.0.113.7}\n  to: {pod: b}\n  port: 80\n",
			`f.yaml:6: cases[0].to (case "a")`, "through its NodePort (to: {node: NAME}, port: the NodePort), an externalIP or a LoadBalancer IP (to: {ip: ADDR}, with from.via), not a pod directly"},
		{"from outside to a Service", "  from: {ip: 203.0.113.7}\n  to: {service: web}\n  port: 80\n",
			`f.yaml:6: cases[0].to (case "a")`, "not a Service directly"},
		{"from outside without a port", "  from: {ip: 203.0.113.7}\n  to: {node: worker-1}\n",
			`f.yaml:4: cases[0].protocol (case "a")`, "from outside (from.ip 203.0.113.7) a packet reaches a Service on a port: give protocol TCP or UDP and port"},
		{"from outside with ICMP", "  from: {ip: 203.0.113.7}\n  to: {node: worker-1}\n  protocol: ICMP\n",
			`f.yaml:7: cases[0].protocol (case "a")`, "give protocol TCP or UDP and port"},
		{"from outside, families mixed", "  from: {ip: 203.0.113.7, via: worker-1}\n  to: {ip: 'fd00::10'}\n  port: 443\n",
			`f.yaml:6: cases[0].to.ip (case "a")`, "from.ip 203.0.113.7 and to.ip fd00::10 are of different IP families"},
		{"via another node than the NodePort's", "  from:\n    ip: 203.0.113.7\n    via: worker-2\n  to: {node: worker-1}\n  port: 30080\n",
			`f.yaml:7: cases[0].from.via (case "a")`, "node worker-2: the packet to node worker-1's address arrives on worker-1's own uplink: drop via, or give worker-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(head+"cases:\n- name: a\n"+tc.body))
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *Error", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want+": ") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got  %q\nwant %q... saying %q", err, tc.want, tc.says)
			}
		})
	}
}
