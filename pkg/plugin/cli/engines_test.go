package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
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
		{"service", resolve.Endpoint{Kind: resolve.KindService, Namespace: "default", Name: "web"}, demoCluster(), false, outcome.DestinationService, "", ""},
		{"a pod's IP", resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("10.244.2.8")}, []runtime.Object{runningPod("demo", "pod-c", "node-2", "10.244.2.8")}, false, outcome.DestinationPodIP, "node-2", ""},
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
			o := &TraceOptions{}
			o.ErrOut = &errOut
			c := &Clients{Kube: kube, Lookup: resolve.FromClientset(kube)}
			nodes, kind, empty, err := o.receiverNodes(context.Background(), c, &resolve.Result{Source: src, Destination: tc.dst})
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
// it: 0 is no flags (not SYN), and ECE and CWR are not dropped.
func TestTCPFlagsReachTheHelper(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "none": "0", "ECE,CWR": "192", "0xc2": "194", "SYN": "2", "ACK": "16"} {
		var flags int32
		if err := (&tcpFlagsValue{&flags}).Set(in); err != nil {
			t.Fatalf("--tcp-flags %s: %v", in, err)
		}
		tf := traceflow.Build(traceflow.Request{Name: "t", Protocol: traceflow.TCP, DstPort: 80, TCPFlags: flags, TTL: 64})
		res := &resolve.Result{
			Source:      resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "pod-a", IP: netip.MustParseAddr("10.244.1.5")},
			Destination: resolve.Endpoint{Kind: resolve.KindPod, IP: netip.MustParseAddr("10.244.2.7")},
		}
		pod, err := helperpod.Build(helperpod.Params{TraceName: "t", Namespace: "kube-system", Node: "n1", Role: helperpod.RoleSender,
			Image: "helper:test", Tag: 7, Timeout: time.Second, Args: senderArgs(res, tf)})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(pod.Spec.Containers[0].Args, " ")
		if !strings.Contains(got, "--tcp-flags "+want+" ") && !strings.HasSuffix(got, "--tcp-flags "+want) {
			t.Errorf("--tcp-flags %s: the helper gets %q, want --tcp-flags %s", in, got, want)
		}
	}
}

// The exit code and the final error follow the verdict, the expectation
// and what the destination is; a predicted verdict says so.
func TestFinishJudgesTheOutcome(t *testing.T) {
	gw := &outcome.Hop{Node: "n1", Observation: report.Observation{Action: report.ActionForwardedOutOfNetwork}}
	guess := &outcome.Hop{Node: "n1", Observation: report.Observation{Action: report.ActionDropped, Inferred: true}}
	for _, tc := range []struct {
		name   string
		r      traceResult
		expect string
		code   exitcode.Code
		msg    string
	}{
		{"gateway, pod destination", traceResult{verdict: outcome.ForwardedOutOfNetwork, reason: "left", dst: outcome.DestinationPod, decided: gw}, "delivered", exitcode.Verdict, "left the pod network"},
		{"gateway, outside destination", traceResult{verdict: outcome.ForwardedOutOfNetwork, reason: "left", dst: outcome.DestinationOutside, decided: gw}, "delivered", exitcode.OK, ""},
		{"predicted drop", traceResult{verdict: outcome.Dropped, reason: "dropped on n1", dst: outcome.DestinationPod, decided: guess}, "delivered", exitcode.Verdict, "dropped on n1 (predicted by OVS's trace, not observed)"},
		{"tunnel, no receiver", traceResult{verdict: outcome.Incomplete, reason: "no receiver", dst: outcome.DestinationPod}, "delivered", exitcode.Timeout, "did not complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			o := &TraceOptions{format: outputPlain, expect: tc.expect}
			o.Out, o.ErrOut = &out, &errOut
			s := newSink(outputPlain, false, false, &out, time.Now)
			s.Emit(outcome.TraceStarted{Name: "t", DestinationKind: tc.r.dst})
			s.Emit(outcome.Finished{Verdict: tc.r.verdict, Reason: tc.r.reason, Decided: tc.r.decided})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			err := o.finish(s, &traceflow.Traceflow{}, tc.r, nil)
			if exitcode.Of(err) != tc.code || (tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg))) {
				t.Errorf("exit %d, %v; want %d saying %q", exitcode.Of(err), err, tc.code, tc.msg)
			}
			if want := fmt.Sprintf("(exit %d)", tc.code); !strings.Contains(out.String(), want) {
				t.Errorf("summary does not end with %s:\n%s", want, out.String())
			}
		})
	}
}
