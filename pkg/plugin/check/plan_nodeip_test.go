package check

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tracerun"
)

// A case beyond pods asks resolution what the single trace asks: node/NAME
// or the address as SRC, node/NAME as DST, from.via as --via, and IPv6
// where an address of the case is.
func TestPlanQueryBeyondPods(t *testing.T) {
	node := func(n string) resolve.Ref { return resolve.Ref{Kind: resolve.KindNode, Name: n} }
	ip := func(s string) resolve.Ref { return resolve.Ref{Kind: resolve.KindIP, IP: netip.MustParseAddr(s)} }
	for _, tc := range []struct {
		name, body string
		want       resolve.Query
	}{
		{"a node to a pod", "  from: {node: worker-1}\n  to: {pod: api-1}\n  port: 80\n",
			resolve.Query{Source: node("worker-1"), Destination: resolve.Ref{Kind: resolve.KindPod, Namespace: "shop", Name: "api-1"},
				Namespace: "default", Protocol: traceflow.TCP, DstPort: 80}},
		{"a pod to a node", "  from: {pod: front-a}\n  to: {node: worker-2}\n",
			resolve.Query{Source: resolve.Ref{Kind: resolve.KindPod, Namespace: "shop", Name: "front-a"}, Destination: node("worker-2"),
				Namespace: "default", Protocol: traceflow.ICMP}},
		{"a node to an IPv6 address", "  from: {node: worker-1}\n  to: {ip: 'fd00::10'}\n",
			resolve.Query{Source: node("worker-1"), Destination: ip("fd00::10"), Namespace: "default", Protocol: traceflow.ICMP, IPv6: true}},
		{"outside to a NodePort, no via", "  from: {ip: 203.0.113.7}\n  to: {node: worker-1}\n  port: 30080\n",
			resolve.Query{Source: ip("203.0.113.7"), Destination: node("worker-1"), Namespace: "default", Protocol: traceflow.TCP, DstPort: 30080}},
		{"outside to an externalIP via node/NAME", "  from: {ip: 203.0.113.7, via: node/worker-2}\n  to: {ip: 192.0.2.10}\n  protocol: UDP\n  port: 53\n",
			resolve.Query{Source: ip("203.0.113.7"), Destination: ip("192.0.2.10"), Namespace: "default", Protocol: traceflow.UDP, DstPort: 53, Via: "worker-2"}},
		{"outside over IPv6", "  from: {ip: 'fd00::7', via: worker-2}\n  to: {node: worker-2}\n  port: 30080\n",
			resolve.Query{Source: ip("fd00::7"), Destination: node("worker-2"), Namespace: "default", Protocol: traceflow.TCP, DstPort: 30080, Via: "worker-2", IPv6: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("s.yaml", []byte(head+"defaults: {namespace: shop}\ncases:\n- name: c\n"+tc.body))
			if err != nil {
				t.Fatal(err)
			}
			c := s.Cases[0]
			// No cluster: none of these sources or destinations is looked up
			// before resolution.
			p := &Planner{Namespace: "default"}
			srcs, err := p.sources(context.Background(), c)
			if err != nil || len(srcs) != 1 {
				t.Fatalf("sources %v, %v: want one", srcs, err)
			}
			dst, err := p.destination(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, p.query(c, srcs[0], dst), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("query (-want +got):\n%s", diff)
			}
		})
	}
}

func readyNode(name, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}}
}

// beyondPods is cluster() with two nodes and Service shop/web, reachable
// from outside by NodePort 30080 and externalIP 192.0.2.10 on port 80.
func beyondPods() []runtime.Object {
	web := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.8", ExternalIPs: []string{"192.0.2.10"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}
	return append(cluster(), readyNode("node-1", "172.18.0.2"), readyNode("node-2", "172.18.0.3"), web)
}

func planBeyondPods(t *testing.T, s *Suite) ([]Trace, error) {
	t.Helper()
	cs := fake.NewClientset(beyondPods()...)
	p := &Planner{Lookup: resolve.FromClientset(cs), Pods: PodsFromClientset(cs), Namespace: "default", DefaultTimeout: 10 * time.Second}
	return p.Plan(context.Background(), []*Suite{s})
}

// Resolved, a node source sends from its node and an outside source from
// the via node (the NodePort's own, or from.via), which is where the
// shared helpers serve them; reports name them node/NAME and by address.
func TestPlanBeyondPodsResolves(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		// want is the trace's name, source, sending node, destination,
		// entry and family.
		want string
	}{
		{"a node to a pod", "  from: {node: node-2}\n  to: {pod: api-1}\n  port: 8080\n",
			"c | node/node-2 | node-2 | shop/api-1 10.0.2.1:8080 | - | v4"},
		{"a pod to a node", "  from: {pod: front-a}\n  to: {node: node-2}\n  port: 10250\n",
			"c | shop/front-a | node-1 | node/node-2 172.18.0.3:10250 | - | v4"},
		{"outside to a NodePort", "  from: {ip: 203.0.113.7}\n  to: {node: node-2}\n  port: 30080\n",
			"c | 203.0.113.7 | node-2 | shop/svc/web 172.18.0.3:30080 | NodePort via node-2 | v4"},
		{"outside to an externalIP", "  from: {ip: 203.0.113.7, via: node/node-1}\n  to: {ip: 192.0.2.10}\n  port: 80\n",
			"c | 203.0.113.7 | node-1 | shop/svc/web 192.0.2.10:80 | externalIP via node-1 | v4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("s.yaml", []byte(head+"defaults: {namespace: shop}\ncases:\n- name: c\n"+tc.body))
			if err != nil {
				t.Fatal(err)
			}
			traces, err := planBeyondPods(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if len(traces) != 1 {
				t.Fatalf("%d traces, want 1", len(traces))
			}
			tr := traces[0]
			r := tr.Result
			entry, family := "-", "v4"
			if r.Entry != nil {
				entry = r.Entry.How + " via " + r.Entry.Via
			}
			if tr.IPv6 {
				family = "v6"
			}
			got := strings.Join([]string{tr.Name, tracerun.EndpointName(r.Source), r.Source.Node,
				tracerun.EndpointName(r.Destination) + " " + netip.AddrPortFrom(r.Destination.IP, uint16(r.DstPort)).String(), //nolint:gosec // a port
				entry, family}, " | ")
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// What only the cluster shows is refused by resolution, at the case's
// line, with exit 1: nothing was created yet. A node traced to itself
// (in a case built by hand, which Parse would refuse) says node, not pod.
func TestPlanBeyondPodsErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"an externalIP without via", "  from: {ip: 203.0.113.7}\n  to: {ip: 192.0.2.10}\n  port: 80\n",
			`s.yaml:4: cases[0] (case "c"): externalIP 192.0.2.10 is not a node's: say which node's uplink receives the packet`},
		{"a via node that does not exist", "  from: {ip: 203.0.113.7, via: node-9}\n  to: {ip: 192.0.2.10}\n  port: 80\n",
			`s.yaml:4: cases[0] (case "c"): --via node/node-9: no such node`},
		{"a NodePort no Service has", "  from: {ip: 203.0.113.7}\n  to: {node: node-1}\n  port: 30081\n",
			`s.yaml:4: cases[0] (case "c"): no Service has TCP NodePort 30081`},
		{"an outside address a pod holds", "  from: {ip: 10.0.1.1}\n  to: {node: node-1}\n  port: 30080\n",
			`s.yaml:4: cases[0] (case "c"): SRC 10.0.1.1 is pod shop/front-a's address`},
		{"a node's address as the outside one", "  from: {ip: 172.18.0.2}\n  to: {node: node-2}\n  port: 30080\n",
			`s.yaml:4: cases[0] (case "c"): SRC 172.18.0.2 is node node-1's address`},
		{"a source node that does not exist", "  from: {node: node-9}\n  to: {pod: api-1}\n",
			`s.yaml:4: cases[0] (case "c"): source node node-9 not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("s.yaml", []byte(head+"cases:\n- name: c\n"+tc.body))
			if err != nil {
				t.Fatal(err)
			}
			_, err = planBeyondPods(t, s)
			if exitcode.Of(err) != exitcode.Usage || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v (exit %d), want exit 1 starting %q", err, exitcode.Of(err), tc.want)
			}
		})
	}
	t.Run("a node to itself", func(t *testing.T) {
		at := Pos{"s.yaml", 6}
		s := &Suite{File: "s.yaml", Cases: []Case{{Name: "c", Path: "cases[0]", At: Pos{"s.yaml", 4},
			From: From{Node: "node-1"}, To: To{Node: "node-1", At: at}, Protocol: traceflow.ICMP}}}
		_, err := planBeyondPods(t, s)
		want := `s.yaml:6: cases[0].to (case "c"): the source and the destination are the same node node-1`
		if exitcode.Of(err) != exitcode.Usage || err.Error() != want {
			t.Fatalf("got %v (exit %d), want exit 1: %q", err, exitcode.Of(err), want)
		}
	})
}

// The packet of a trace is the run's, over IPv6 where the case's
// addresses say so.
func TestTracingProbeFamily(t *testing.T) {
	for _, tc := range []struct {
		name           string
		run, trace, v6 bool
	}{
		{"IPv4", false, false, false},
		{"an IPv6 address in the case", false, true, true},
		{"the run's --ipv6 (a trace command's --all-endpoints)", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Tracing{Probe: tracerun.Probe{IPv6: tc.run, TTL: 9}}
			p := tr.probe(Trace{IPv6: tc.trace})
			if p.IPv6 != tc.v6 || p.TTL != 9 {
				t.Errorf("probe %+v, want IPv6 %v and the run's TTL 9", p, tc.v6)
			}
		})
	}
}
