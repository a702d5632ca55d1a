package resolve

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func mustRef(t *testing.T, s string) Ref {
	t.Helper()
	r, err := ParseDestination(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResolve(t *testing.T) {
	ip := netip.MustParseAddr
	podA := Endpoint{Kind: KindPod, Namespace: "default", Name: "pod-a", IP: ip("10.244.1.5"), Node: "node-1"}
	tests := []struct {
		name     string
		q        Query
		src, dst string
		want     *Result
	}{
		{
			name: "pod to pod, ICMP by default", src: "pod-a", dst: "pod-b",
			want: &Result{Source: podA, Protocol: traceflow.ICMP,
				Destination: Endpoint{Kind: KindPod, Namespace: "default", Name: "pod-b", IP: ip("10.244.2.7"), Node: "node-2"}},
		},
		{
			name: "pod to pod in another namespace over IPv6", src: "pod-a", dst: "demo/pod-c",
			q: Query{IPv6: true, Protocol: traceflow.TCP, DstPort: 443},
			want: &Result{Protocol: traceflow.TCP, DstPort: 443,
				Source:      Endpoint{Kind: KindPod, Namespace: "default", Name: "pod-a", IP: ip("fd00:1::5"), Node: "node-1"},
				Destination: Endpoint{Kind: KindPod, Namespace: "demo", Name: "pod-c", IP: ip("fd00:2::8"), Node: "node-2"}},
		},
		{
			name: "Service without a port takes its first", src: "pod-a", dst: "svc/web",
			want: &Result{Source: podA, Protocol: traceflow.TCP, DstPort: 80,
				Destination: Endpoint{Kind: KindService, Namespace: "default", Name: "web", IP: ip("10.96.0.10")}},
		},
		{
			name: "Service with a port it exposes", src: "pod-a", dst: "svc/web",
			q: Query{Protocol: traceflow.UDP, DstPort: 53},
			want: &Result{Source: podA, Protocol: traceflow.UDP, DstPort: 53,
				Destination: Endpoint{Kind: KindService, Namespace: "default", Name: "web", IP: ip("10.96.0.10")}},
		},
		{
			name: "dual-stack Service in another namespace over IPv6", src: "pod-a", dst: "demo/svc/dual",
			q: Query{IPv6: true},
			want: &Result{Protocol: traceflow.TCP, DstPort: 8080,
				Source:      Endpoint{Kind: KindPod, Namespace: "default", Name: "pod-a", IP: ip("fd00:1::5"), Node: "node-1"},
				Destination: Endpoint{Kind: KindService, Namespace: "demo", Name: "dual", IP: ip("fd00:96::20")}},
		},
		{
			name: "Service without ready endpoints is a warning", src: "pod-a", dst: "svc/empty",
			want: &Result{Source: podA, Protocol: traceflow.TCP, DstPort: 80,
				Destination: Endpoint{Kind: KindService, Namespace: "default", Name: "empty", IP: ip("10.96.0.30")},
				Warnings: []string{"Service default/empty has no ready IPv4 endpoints, so the packet will likely be dropped or rejected: " +
					"check its selector and pods (kubectl get endpointslices -n default -l kubernetes.io/service-name=empty)"}},
		},
		{
			name: "an IP needs no lookup", src: "pod-a", dst: "192.0.2.1",
			q:    Query{Protocol: traceflow.UDP, DstPort: 53},
			want: &Result{Source: podA, Protocol: traceflow.UDP, DstPort: 53, Destination: Endpoint{Kind: KindIP, IP: ip("192.0.2.1")}},
		},
		{
			// Its traffic is its node's: the address is the kernel's pick.
			name: "host-network source sends as its node", src: "host-pod", dst: "pod-b",
			want: &Result{Protocol: traceflow.ICMP,
				Source:      Endpoint{Kind: KindPod, Namespace: "default", Name: "host-pod", Node: "node-1", HostNetwork: true},
				Destination: Endpoint{Kind: KindPod, Namespace: "default", Name: "pod-b", IP: ip("10.244.2.7"), Node: "node-2"}},
		},
		{
			name: "host-network source with --live", src: "host-pod", dst: "pod-b", q: Query{Live: true},
			want: &Result{Protocol: traceflow.ICMP,
				Source:      Endpoint{Kind: KindPod, Namespace: "default", Name: "host-pod", IP: ip("192.168.0.11"), Node: "node-1", HostNetwork: true},
				Destination: Endpoint{Kind: KindPod, Namespace: "default", Name: "pod-b", IP: ip("10.244.2.7"), Node: "node-2"}},
		},
		{
			// The node's listed address is not the probe's: its kernel
			// picks the source for the destination (a management port's).
			name: "node to pod", src: "node/node-1", dst: "pod-b", q: Query{Protocol: traceflow.TCP, DstPort: 8080},
			want: &Result{Protocol: traceflow.TCP, DstPort: 8080,
				Source:      Endpoint{Kind: KindNode, Name: "node-1", Node: "node-1"},
				Destination: Endpoint{Kind: KindPod, Namespace: "default", Name: "pod-b", IP: ip("10.244.2.7"), Node: "node-2"}},
		},
		{
			name: "pod to a node's InternalIP of the family asked", src: "pod-a", dst: "node/node-1", q: Query{IPv6: true},
			want: &Result{Protocol: traceflow.ICMP,
				Source:      Endpoint{Kind: KindPod, Namespace: "default", Name: "pod-a", IP: ip("fd00:1::5"), Node: "node-1"},
				Destination: Endpoint{Kind: KindNode, Name: "node-1", Node: "node-1", IP: ip("fd00:168::11")}},
		},
		{
			name: "a node without an InternalIP by its ExternalIP", src: "pod-a", dst: "node/node-2",
			want: &Result{Source: podA, Protocol: traceflow.ICMP,
				Destination: Endpoint{Kind: KindNode, Name: "node-2", Node: "node-2", IP: ip("203.0.113.12")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.q
			q.Namespace = "default"
			q.Source, q.Destination = mustRef(t, tt.src), mustRef(t, tt.dst)
			cs := fake.NewClientset(clusterObjects()...)
			got, err := Resolve(context.Background(), FromClientset(cs), q)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
			assertReadOnly(t, cs)
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name     string
		src, dst string
		q        Query
		wants    []string
	}{
		{"source not found", "nope", "pod-b", Query{}, []string{"source pod default/nope not found", "kubectl get pods -n default"}},
		{"destination not found", "pod-a", "demo/nope", Query{}, []string{"destination pod demo/nope not found", "kubectl get pods -n demo"}},
		{"source pending", "pending", "pod-b", Query{}, []string{"is Pending, not Running", "kubectl get pod -n default pending -w"}},
		{"destination terminating", "pod-a", "leaving", Query{}, []string{"is being deleted", "pick a pod that is Running"}},
		{"no IP yet", "no-ip", "pod-b", Query{}, []string{"has no IP address yet", "wait until it has one"}},
		{"no IPv6 on destination", "pod-a", "pod-b", Query{IPv6: true}, []string{"has no IPv6 address (it has 10.244.2.7)", "drop --ipv6"}},
		{"Service not found", "pod-a", "svc/nope", Query{}, []string{"Service default/nope not found", "kubectl get services -n default"}},
		{"headless", "pod-a", "svc/headless", Query{}, []string{"is headless", "trace to one of its pods"}},
		{"ExternalName", "pod-a", "svc/external", Query{}, []string{"ExternalName", "trace to the external address"}},
		{"port not exposed", "pod-a", "svc/web", Query{Protocol: traceflow.TCP, DstPort: 8080}, []string{"does not expose TCP port 8080 (it exposes TCP 80 (http), UDP 53 (dns))", "e.g. --tcp 80"}},
		{"wrong protocol", "pod-a", "svc/web", Query{Protocol: traceflow.UDP, DstPort: 80}, []string{"does not expose UDP port 80", "--tcp 80"}},
		{"ICMP to a Service", "pod-a", "svc/web", Query{Protocol: traceflow.ICMP}, []string{"not ICMP", "drop --icmp"}},
		{"first port SCTP", "pod-a", "svc/sctp", Query{}, []string{"first port is SCTP 9999", "--tcp PORT"}},
		{"no ports", "pod-a", "svc/portless", Query{}, []string{"exposes no ports", "trace to one of its pods"}},
		{"no IPv6 cluster IP", "pod-a", "svc/web", Query{IPv6: true}, []string{"has no IPv6 cluster IP (it has 10.96.0.10)", "drop --ipv6"}},
		{"node not found", "node/nope", "pod-b", Query{}, []string{"source node nope not found", "kubectl get nodes"}},
		{"destination node not found", "pod-a", "node/nope", Query{}, []string{"destination node nope not found", "kubectl get nodes"}},
		{"node without addresses", "pod-a", "node/bare", Query{}, []string{"reports no InternalIP or ExternalIP", "kubectl get node bare -o wide"}},
		{"node without the family", "pod-a", "node/node-2", Query{IPv6: true}, []string{"has no IPv6 address (it has 203.0.113.12)", "drop --ipv6"}},
		{"node source with --live", "node/node-1", "pod-b", Query{Live: true}, []string{"SRC node/node-1 is a node", "drop --live"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.q
			q.Namespace = "default"
			q.Source, q.Destination = mustRef(t, tt.src), mustRef(t, tt.dst)
			cs := fake.NewClientset(clusterObjects()...)
			_, err := Resolve(context.Background(), FromClientset(cs), q)
			if err == nil {
				t.Fatal("Resolve succeeded")
			}
			wantUsageError(t, err, tt.wants)
			assertReadOnly(t, cs)
		})
	}
}

func TestResolveAPIFailures(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "pod-a", errors.New("rbac")), "not allowed to read"},
		{"unreachable", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "check that the cluster is reachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset()
			cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tt.err })
			_, err := Resolve(context.Background(), FromClientset(cs), Query{
				Namespace: "default", Source: mustRef(t, "pod-a"), Destination: mustRef(t, "pod-b")})
			if code := exitcode.Of(err); code != exitcode.Setup {
				t.Errorf("exit code %d, want %d (%v)", code, exitcode.Setup, err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v lacks %q", err, tt.want)
			}
		})
	}
}

// assertReadOnly checks that resolution only read the cluster.
func assertReadOnly(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	for _, a := range cs.Actions() {
		if v := a.GetVerb(); v != "get" && v != "list" {
			t.Errorf("resolution did %s %s", v, a.GetResource().Resource)
		}
	}
}

// wantUsageError checks that err is a usage error (exit 1) saying each
// of wants.
func wantUsageError(t *testing.T, err error, wants []string) {
	t.Helper()
	if code := exitcode.Of(err); code != exitcode.Usage {
		t.Errorf("exit code %d, want %d (%v)", code, exitcode.Usage, err)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
