package tracerun

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// The destination's kind decides whether leaving the pod network is the
// end the user wanted: only for an address outside the cluster's pods.
func TestReceiverNodesSayWhatTheDestinationIs(t *testing.T) {
	hostPod := runningPod("kube-system", "host", "node-2", "192.168.77.12")
	hostPod.Spec.HostNetwork = true
	src := resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "pod-a", Node: "node-1"}
	for _, tc := range []struct {
		name      string
		dst       resolve.Endpoint
		objs      []runtime.Object
		forbidden bool
		want      outcome.DestinationKind
		receivers string
		warning   string
	}{
		{"pod", resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "pod-b", Node: "node-2"}, nil, false, outcome.DestinationPod, "node-2", ""},
		{"host-network pod", resolve.Endpoint{Kind: resolve.KindPod, Namespace: "kube-system", Name: "host", Node: "node-2", HostNetwork: true}, nil, false, outcome.DestinationOutside, "node-2", ""},
		{"service", resolve.Endpoint{Kind: resolve.KindService, Namespace: "default", Name: "web"}, webService(), false, outcome.DestinationService, "", ""},
		{"a pod's IP", resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("10.244.2.8")}, []runtime.Object{runningPod("demo", "pod-c", "node-2", "10.244.2.8")}, false, outcome.DestinationPodIP, "node-2", ""},
		{"node/NAME", resolve.Endpoint{Kind: resolve.KindNode, Name: "node-2", Node: "node-2", IP: netip.MustParseAddr("192.168.77.12")}, nil, false, outcome.DestinationOutside, "node-2", ""},
		{"a node's IP", resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("192.168.77.12")}, []runtime.Object{hostPod}, false, outcome.DestinationOutside, "", ""},
		{"an external IP", resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("8.8.8.8")}, nil, false, outcome.DestinationOutside, "", ""},
		{"pods not listable", resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("10.244.2.8")}, nil, true, outcome.DestinationOutside, "", "cannot tell whether 10.244.2.8 is a pod's IP"},
		{"a Service's cluster IP", resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("10.96.0.20")}, servedFrom("node-2"), false, outcome.DestinationService, "node-2", ""},
		{"a Service's second cluster IP", resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("fd00:96::20")}, servedFrom("node-2"), false, outcome.DestinationService, "node-2", ""},
		{"Services not listable", resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("10.96.0.20")}, servedFrom("node-2"), true, outcome.DestinationOutside, "", "cannot tell whether 10.96.0.20 is a Service's cluster IP"},
		{"a Service without ready endpoints", resolve.Endpoint{Kind: resolve.KindService, Namespace: "demo", Name: "echo"}, notReady(servedFrom("node-2")), false, outcome.DestinationService, "", ""},
		{"its bare cluster IP", resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("10.96.0.20")}, notReady(servedFrom("node-2")), false, outcome.DestinationService, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(tc.objs...)
			if tc.forbidden {
				for _, r := range []string{"pods", "services"} {
					kube.PrependReactor("list", r, func(k8stesting.Action) (bool, runtime.Object, error) {
						return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: r}, "", errors.New("no"))
					})
				}
			}
			var errOut bytes.Buffer
			r := &Runner{Clients: &Clients{Kube: kube, Lookup: resolve.FromClientset(kube)}, Notes: &errOut}
			got, err := r.receiverNodes(context.Background(), &resolve.Result{Source: src, Destination: tc.dst})
			nodes, kind, empty := got.nodes, got.kind, got.empty
			if err != nil {
				t.Fatal(err)
			}
			// A Service without a ready endpoint is named: Antrea's agents
			// would not see the probe's end.
			if wantEmpty := strings.Contains(tc.name, "without ready endpoints") || tc.name == "its bare cluster IP"; wantEmpty != (empty == "demo/echo") {
				t.Errorf("empty %q", empty)
			}
			if kind != tc.want || strings.Join(nodes, ",") != tc.receivers {
				t.Errorf("kind %s receivers %v; want %s %s", kind, nodes, tc.want, tc.receivers)
			}
			if !strings.Contains(errOut.String(), tc.warning) || (tc.warning == "" && errOut.Len() > 0) {
				t.Errorf("warnings %q, want %q", errOut.String(), tc.warning)
			}
		})
	}
}

// servedFrom is a dual-stack Service "echo" (10.96.0.20, fd00:96::20)
// whose one ready endpoint runs on node.
func servedFrom(node string) []runtime.Object {
	ready := true
	return []runtime.Object{
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "echo"},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20", "fd00:96::20"}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "echo-1", Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.2.9"}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		},
	}
}

// notReady is objs with every endpoint not ready.
func notReady(objs []runtime.Object) []runtime.Object {
	no := false
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			for i := range s.Endpoints {
				s.Endpoints[i].Conditions.Ready = &no
			}
		}
	}
	return objs
}

// What --tcp-flags says reaches the helper as a number, all eight bits of
// it: 0 is no flags (not SYN), and ECE and CWR (192) are not dropped. The
// helper pod's args are read as the helper reads them.
func TestTCPFlagsReachTheHelper(t *testing.T) {
	for flags, want := range map[int32]uint{0: 0, 192: 192, 194: 194, 2: 2, 16: 16} {
		tf := traceflow.Build(traceflow.Request{Name: "t", Protocol: traceflow.TCP, DstPort: 80, TCPFlags: flags, TTL: 64})
		res := &resolve.Result{
			Source:      resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "pod-a", IP: netip.MustParseAddr("10.244.1.5")},
			Destination: resolve.Endpoint{Kind: resolve.KindPod, IP: netip.MustParseAddr("10.244.2.7")},
		}
		pod, err := helperpod.Build(helperpod.Params{TraceName: "t", Namespace: "kube-system", Node: "n1", Role: helperpod.RoleSender,
			Image: "helper:test", Tag: 7, Timeout: time.Second, Probe: senderArgs(res, tf)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := report.Parse(pod.Spec.Containers[0].Args)
		if err != nil || got.Probe.TCPFlags == nil || *got.Probe.TCPFlags != want {
			t.Errorf("--tcp-flags %d: the helper reads %q as %+v, %v; want TCP flags %d", flags, pod.Spec.Containers[0].Args, got.Probe, err, want)
		}
	}
}

// A node as SRC reaches the sender helper as --source-node, with no pod
// and no source address (the node's kernel picks it); the record names
// the nodes in its annotations, since a Traceflow's source is a pod.
func TestNodeEndpointsReachTheHelperAndTheRecord(t *testing.T) {
	res := &resolve.Result{
		Source:      resolve.Endpoint{Kind: resolve.KindNode, Name: "node-1", Node: "node-1"},
		Destination: resolve.Endpoint{Kind: resolve.KindNode, Name: "node-2", Node: "node-2", IP: netip.MustParseAddr("192.168.77.12")},
		Protocol:    traceflow.TCP, DstPort: 10250,
	}
	tf := Record(res, DefaultProbe(), 10*time.Second, "abcde")
	if tf.Spec.Source != (traceflow.Source{}) || tf.Spec.Destination.IP != "192.168.77.12" {
		t.Errorf("record source %+v, destination %+v: want no source pod and the node's address", tf.Spec.Source, tf.Spec.Destination)
	}
	if tf.Name != "node-node-1-to-node-node-2-abcde" {
		t.Errorf("record name %q", tf.Name)
	}
	if a := tf.Annotations; a[labels.SourceNodeAnnotation] != "node-1" || a[labels.DestinationNodeAnnotation] != "node-2" {
		t.Errorf("record annotations %v: want the source and destination nodes", a)
	}
	pod, err := helperpod.Build(helperpod.Params{TraceName: tf.Name, Namespace: "kube-system", Node: "node-1", Role: helperpod.RoleSender,
		Image: "helper:test", Tag: 7, Timeout: time.Second, Probe: senderArgs(res, tf)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := report.Parse(pod.Spec.Containers[0].Args)
	if err != nil {
		t.Fatalf("the helper cannot read %q: %v", pod.Spec.Containers[0].Args, err)
	}
	if p := got.Probe; !p.SourceNode || p.SourcePod != "" || p.SourceIP != "" || p.Destination != "192.168.77.12" || p.TCP != 10250 {
		t.Errorf("the helper reads %+v: want --source-node to 192.168.77.12 TCP 10250, without a pod or source address", p)
	}
	if n := EndpointName(res.Source); n != "node/node-1" {
		t.Errorf("EndpointName = %q, want node/node-1", n)
	}

	// A host-network pod's traffic is its node's: the same flags, and
	// the record keeps the pod as its source.
	res.Source = resolve.Endpoint{Kind: resolve.KindPod, Namespace: "kube-system", Name: "ingress", Node: "node-1", HostNetwork: true}
	tf = Record(res, DefaultProbe(), 10*time.Second, "abcde")
	if tf.Spec.Source.Pod != "ingress" || tf.Annotations[labels.SourceNodeAnnotation] != "node-1" {
		t.Errorf("host-network source: record source %+v, annotations %v", tf.Spec.Source, tf.Annotations)
	}
	if p := senderArgs(res, tf); !p.SourceNode || p.SourcePod != "" || p.SourceIP != "" {
		t.Errorf("host-network source: the helper gets %+v, want --source-node alone", p)
	}
	// With --live, Antrea's agents trace the pod's own traffic: no node.
	live := DefaultProbe()
	live.Live = true
	if tf = Record(res, live, 10*time.Second, "abcde"); tf.Annotations[labels.SourceNodeAnnotation] != "" {
		t.Errorf("--live host-network source: annotations %v name a source node", tf.Annotations)
	}
}

// runningPod is a running pod on node with ips.
func runningPod(ns, name, node string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ips[0]},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// webService is Service default/web whose one ready endpoint names no node.
func webService() []runtime.Object {
	ready := true
	return []runtime.Object{
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		},
	}
}
