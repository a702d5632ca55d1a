package resolve

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// nodeAt is a node with one InternalIP and its Ready condition.
func nodeAt(name, ip string, ready bool) *corev1.Node {
	n := node(name, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	if ip != "" {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return n
}

// outsideCluster is three nodes (tf-node-3 not Ready), Service np/web
// reachable from outside by NodePort 30080, externalIP 10.89.0.50 and
// LoadBalancer IP 10.89.0.60 on port 80, its pod, and a host-network pod
// holding tf-node-1's address.
func outsideCluster() []runtime.Object {
	web := service("np", "web", []string{"10.96.5.5"}, corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080})
	web.Spec.Type = corev1.ServiceTypeNodePort
	web.Spec.ExternalIPs = []string{"10.89.0.50"}
	web.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.89.0.60"}}
	hostNet := pod("kube-system", "ovnkube-node-a", "tf-node-1", corev1.PodRunning, "10.89.0.11")
	hostNet.Spec.HostNetwork = true
	return []runtime.Object{
		nodeAt("tf-node-1", "10.89.0.11", true),
		nodeAt("tf-node-2", "10.89.0.12", true),
		nodeAt("tf-node-3", "10.89.0.13", false),
		web, slice("np", "web", discoveryv1.AddressTypeIPv4, true),
		pod("np", "web-1", "tf-node-2", corev1.PodRunning, "10.244.1.3"),
		hostNet,
	}
}

// outsideQuery is a query from SRC to DST with the protocol, port and
// --via given.
func outsideQuery(t *testing.T, src, dst string, proto traceflow.Protocol, port int32, via string) Query {
	t.Helper()
	s, err := ParseSource(src)
	if err != nil {
		t.Fatal(err)
	}
	return Query{Source: s, Destination: mustRef(t, dst), Namespace: "default", Protocol: proto, DstPort: port, Via: via}
}

func TestResolveOutside(t *testing.T) {
	ip := netip.MustParseAddr
	outside := func(via string) Endpoint { return Endpoint{Kind: KindIP, IP: ip("10.89.0.1"), Node: via} }
	web := func(addr string) Endpoint {
		return Endpoint{Kind: KindService, Namespace: "np", Name: "web", IP: ip(addr)}
	}
	tests := []struct {
		name, dst, via string
		port           int32
		want           *Result
	}{
		{name: "NodePort on node/NAME, received by that node", dst: "node/tf-node-1", port: 30080,
			want: &Result{Source: outside("tf-node-1"), Destination: web("10.89.0.11"), Entry: &Entry{How: "NodePort", Via: "tf-node-1"}}},
		{name: "NodePort with --via naming the same node", dst: "node/tf-node-1", via: "tf-node-1", port: 30080,
			want: &Result{Source: outside("tf-node-1"), Destination: web("10.89.0.11"), Entry: &Entry{How: "NodePort", Via: "tf-node-1"}}},
		{name: "NodePort on a node's address", dst: "10.89.0.12", port: 30080,
			want: &Result{Source: outside("tf-node-2"), Destination: web("10.89.0.12"), Entry: &Entry{How: "NodePort", Via: "tf-node-2"}}},
		{name: "externalIP via a node", dst: "10.89.0.50", via: "tf-node-2", port: 80,
			want: &Result{Source: outside("tf-node-2"), Destination: web("10.89.0.50"), Entry: &Entry{How: "externalIP", Via: "tf-node-2"}}},
		{name: "LoadBalancer IP via a node", dst: "10.89.0.60", via: "tf-node-1", port: 80,
			want: &Result{Source: outside("tf-node-1"), Destination: web("10.89.0.60"), Entry: &Entry{How: "LoadBalancer IP", Via: "tf-node-1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(outsideCluster()...)
			got, err := Resolve(context.Background(), FromClientset(cs), outsideQuery(t, "10.89.0.1", tt.dst, traceflow.TCP, tt.port, tt.via))
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			tt.want.Protocol, tt.want.DstPort = traceflow.TCP, tt.port
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
			assertReadOnly(t, cs)
		})
	}
}

func TestResolveOutsideErrors(t *testing.T) {
	tcp, udp, icmp := traceflow.TCP, traceflow.UDP, traceflow.ICMP
	tests := []struct {
		name, src, dst, via string
		proto               traceflow.Protocol
		port                int32
		live                bool
		wants               []string
	}{
		{"NodePort with --via another node", "10.89.0.1", "node/tf-node-1", "tf-node-2", tcp, 30080, false,
			[]string{"--via node/tf-node-2", "arrives on node tf-node-1's own uplink", "drop --via"}},
		{"a node's address with --via another node", "10.89.0.1", "10.89.0.12", "tf-node-1", tcp, 30080, false,
			[]string{"--via node/tf-node-1", "arrives on node tf-node-2's own uplink", "give node/tf-node-2"}},
		{"externalIP without --via", "10.89.0.1", "10.89.0.50", "", tcp, 80, false,
			[]string{"externalIP 10.89.0.50 is not a node's", "--via node/NAME"}},
		{"LoadBalancer IP without --via", "10.89.0.1", "10.89.0.60", "", tcp, 80, false,
			[]string{"LoadBalancer IP 10.89.0.60 is not a node's", "--via node/NAME"}},
		{"--via a node not Ready", "10.89.0.1", "10.89.0.50", "tf-node-3", tcp, 80, false,
			[]string{"--via node/tf-node-3", "not Ready", "give a Ready node"}},
		{"NodePort on a node not Ready", "10.89.0.1", "node/tf-node-3", "", tcp, 30080, false,
			[]string{"node/tf-node-3", "not Ready"}},
		{"--via no such node", "10.89.0.1", "10.89.0.50", "tf-node-9", tcp, 80, false,
			[]string{"--via node/tf-node-9", "no such node", "kubectl get nodes"}},
		{"destination node not found", "10.89.0.1", "node/tf-node-9", "", tcp, 30080, false,
			[]string{"destination node tf-node-9 not found", "kubectl get nodes"}},
		{"NodePort nobody has", "10.89.0.1", "node/tf-node-1", "", tcp, 30081, false,
			[]string{"no Service has TCP NodePort 30081", "kubectl get services -A"}},
		{"NodePort on the wrong protocol", "10.89.0.1", "node/tf-node-1", "", udp, 30080, false,
			[]string{"no Service has UDP NodePort 30080"}},
		{"externalIP on a port it does not serve", "10.89.0.1", "10.89.0.50", "tf-node-2", tcp, 8080, false,
			[]string{"10.89.0.50 is no node's address and no Service's externalIP or LoadBalancer IP with TCP port 8080"}},
		{"ICMP", "10.89.0.1", "node/tf-node-1", "", icmp, 0, false, []string{"give --tcp PORT or --udp PORT"}},
		{"no protocol", "10.89.0.1", "node/tf-node-1", "", "", 0, false, []string{"give --tcp PORT or --udp PORT"}},
		{"a pod's address as SRC", "10.244.1.3", "node/tf-node-1", "", tcp, 30080, false,
			[]string{"SRC 10.244.1.3 is pod np/web-1's address", "give the pod as SRC (np/web-1)"}},
		{"a node's address as SRC, by its host-network pod", "10.89.0.11", "node/tf-node-2", "", tcp, 30080, false,
			[]string{"SRC 10.89.0.11 is node tf-node-1's address", "give node/tf-node-1 as SRC"}},
		{"a node's address as SRC, no pod on its host network", "10.89.0.12", "node/tf-node-1", "", tcp, 30080, false,
			[]string{"10.89.0.12", "node/tf-node-2"}},
		{"a pod as DST", "10.89.0.1", "np/web-1", "", tcp, 80, false, []string{"not pod np/pod/web-1 directly"}},
		{"a Service as DST", "10.89.0.1", "np/svc/web", "", tcp, 80, false, []string{"not svc np/svc/web directly", "--via node/NAME"}},
		{"--live", "10.89.0.1", "node/tf-node-1", "", tcp, 30080, true, []string{"SRC 10.89.0.1 is an address outside the cluster", "drop --live"}},
		{"--via with a pod as SRC", "np/web-1", "node/tf-node-1", "tf-node-2", tcp, 30080, false,
			[]string{"--via node/tf-node-2", "SRC np/pod/web-1 is in it", "drop --via"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := outsideQuery(t, tt.src, tt.dst, tt.proto, tt.port, tt.via)
			q.Live = tt.live
			cs := fake.NewClientset(outsideCluster()...)
			res, err := Resolve(context.Background(), FromClientset(cs), q)
			if err == nil {
				t.Fatalf("Resolve succeeded: %+v", res)
			}
			wantUsageError(t, err, tt.wants)
			assertReadOnly(t, cs)
		})
	}
}

// A cluster that cannot be asked is a setup problem, not the user's: each
// list a trace from outside needs fails with exitcode.Setup.
func TestResolveOutsideAPIFailures(t *testing.T) {
	for _, tt := range []struct{ resource, want string }{
		{"pods", "the pods with IP 10.89.0.1"},
		{"nodes", "the nodes"},
		{"services", "the Services"},
	} {
		t.Run(tt.resource, func(t *testing.T) {
			cs := fake.NewClientset(outsideCluster()...)
			cs.PrependReactor("list", tt.resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: tt.resource}, "", errors.New("rbac"))
			})
			_, err := Resolve(context.Background(), FromClientset(cs), outsideQuery(t, "10.89.0.1", "node/tf-node-1", traceflow.TCP, 30080, ""))
			if code := exitcode.Of(err); code != exitcode.Setup {
				t.Errorf("exit code %d, want %d (%v)", code, exitcode.Setup, err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "not allowed to read") {
				t.Errorf("error %v lacks %q and \"not allowed to read\"", err, tt.want)
			}
		})
	}
}
