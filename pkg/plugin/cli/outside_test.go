package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// outsideCluster is node tf-node-1 (10.89.0.11) and Service np/web with
// NodePort 30080 and one ready endpoint: what a trace from outside
// resolves against.
func outsideCluster() []runtime.Object {
	ready := true
	return []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tf-node-1"}, Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.89.0.11"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "np", Name: "web"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.5.5", ClusterIPs: []string{"10.96.5.5"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}}},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "np", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.3"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		},
	}
}

// An address outside the cluster as SRC, and --via, are checked against
// the other flags before any cluster is asked: each refusal is a usage
// error that names the flag and what to do, and connects to nothing.
func TestOutsideSourceRefused(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		wants []string
	}{
		{"--via with a pod as SRC", []string{"pod-a", "node/tf-node-1", "--tcp", "30080", "--via", "node/tf-node-1"},
			[]string{"--via says which node's uplink", "SRC pod/pod-a is in it", "drop --via"}},
		{"--via naming a pod", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080", "--via", "pod/x"},
			[]string{`--via "pod/x": want node/NAME`}},
		{"--via without a name", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080", "--via", "node/"},
			[]string{`--via "node/": want node/NAME`}},
		{"--via with two slashes", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080", "--via", "node/a/b"},
			[]string{`--via "node/a/b": want node/NAME`}},
		{"--live", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080", "--live"},
			[]string{"SRC 10.89.0.1 is an address outside the cluster", "drop --live"}},
		{"--engine agent", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080", "--engine", "agent"},
			[]string{"--engine agent", "SRC 10.89.0.1 is outside the cluster", "use --engine helper"}},
		{"--all-endpoints", []string{"10.89.0.1", "svc/web", "--tcp", "80", "--all-endpoints"},
			[]string{"--all-endpoints traces from a pod", "trace the NodePort, externalIP or LoadBalancer IP itself"}},
		{"--icmp", []string{"10.89.0.1", "node/tf-node-1", "--icmp"},
			[]string{"from outside (SRC 10.89.0.1)", "give --tcp PORT or --udp PORT"}},
		{"no protocol", []string{"10.89.0.1", "node/tf-node-1"},
			[]string{"from outside (SRC 10.89.0.1)", "give --tcp PORT or --udp PORT"}},
		{"IPv6 SRC to an IPv4 DST", []string{"fd00::1", "10.89.0.50", "--tcp", "80", "--via", "tf-node-1"},
			[]string{"SRC fd00::1 is an IPv6 address and the trace is over IPv4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCommand(t, tt.args, outsideCluster()...)
			if code := exitcode.Of(res.err); code != exitcode.Usage {
				t.Fatalf("exit code %d (%v), want %d", code, res.err, exitcode.Usage)
			}
			for _, w := range tt.wants {
				if !strings.Contains(res.err.Error(), w) {
					t.Errorf("message %q lacks %q", res.err, w)
				}
			}
			if res.connected {
				t.Error("a usage error that needs no cluster asked for cluster clients")
			}
		})
	}
}

// An address outside the cluster to a NodePort passes Validate with --via
// as node/NAME, as a bare NAME, or without it, and the dry run prints the
// record of a trace from outside: the source address, the Service on the
// node's address, and the via node and entry in annotations.
func TestOutsideSourceAccepted(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"--via node/NAME", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080", "--via", "node/tf-node-1"}},
		{"--via NAME", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080", "--via", "tf-node-1"}},
		{"--via no/NAME", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080", "--via", "no/tf-node-1"}},
		{"without --via", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080"}},
		{"--round-trip", []string{"10.89.0.1", "node/tf-node-1", "--tcp", "30080", "--round-trip"}},
	}
	wants := []string{
		"name: 10-89-0-1-to-web-x7k2q",
		"traceflow.kubectl-traceflow.io/entry: NodePort",
		"traceflow.kubectl-traceflow.io/via: tf-node-1",
		"destination:\n    ip: 10.89.0.11\n    namespace: np\n    service: web\n",
		"source:\n    ip: 10.89.0.1\n",
		"dstPort: 30080",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCommand(t, append(tt.args, "--dry-run", "-o", "yaml"), outsideCluster()...)
			if res.err != nil {
				t.Fatalf("kubectl traceflow %s: %v", strings.Join(tt.args, " "), res.err)
			}
			if !res.connected {
				t.Error("the dry run never asked the cluster")
			}
			if w := res.writes(); len(w) > 0 {
				t.Errorf("--dry-run changed the cluster: %v", w)
			}
			if res.stderr != "" {
				t.Errorf("unexpected stderr: %q", res.stderr)
			}
			for _, w := range wants {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("the record lacks %q:\n%s", w, res.stdout)
				}
			}
		})
	}
}
