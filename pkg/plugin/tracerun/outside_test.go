package tracerun

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// outsideResult is 10.89.0.1, outside the cluster, to Service np/web by
// its NodePort 30080 on tf-node-1 (10.89.0.11), received by tf-node-1.
func outsideResult() *resolve.Result {
	return &resolve.Result{
		Source:      resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("10.89.0.1"), Node: "tf-node-1"},
		Destination: resolve.Endpoint{Kind: resolve.KindService, Namespace: "np", Name: "web", IP: netip.MustParseAddr("10.89.0.11")},
		Protocol:    traceflow.TCP, DstPort: 30080,
		Entry: &resolve.Entry{How: "NodePort", Via: "tf-node-1"},
	}
}

// The record of a trace from outside says the source address (a
// Traceflow's source has no pod to name), the Service with the address its
// packet goes to, and the via node and entry in annotations; it names no
// source node, since the packet is not the node's own.
func TestOutsideSourceRecord(t *testing.T) {
	tf := Record(outsideResult(), DefaultProbe(), 10*time.Second, "abcde")
	if d := cmp.Diff(traceflow.Source{IP: "10.89.0.1"}, tf.Spec.Source); d != "" {
		t.Errorf("spec.source (-want +got):\n%s", d)
	}
	if d := cmp.Diff(traceflow.Destination{Namespace: "np", Service: "web", IP: "10.89.0.11"}, tf.Spec.Destination); d != "" {
		t.Errorf("spec.destination (-want +got):\n%s", d)
	}
	want := map[string]string{labels.ViaAnnotation: "tf-node-1", labels.EntryAnnotation: "NodePort"}
	if d := cmp.Diff(want, tf.Annotations); d != "" {
		t.Errorf("annotations (-want +got):\n%s", d)
	}
	if tf.Name != "10-89-0-1-to-web-abcde" {
		t.Errorf("record name %q, want 10-89-0-1-to-web-abcde", tf.Name)
	}
	if th := tf.Spec.Packet.TransportHeader; th.TCP == nil || th.TCP.DstPort != 30080 {
		t.Errorf("transport header %+v, want TCP to port 30080", th)
	}

	// Without an entry a Service is its cluster IP's: no address in the
	// spec and no annotations.
	res := outsideResult()
	res.Source = resolve.Endpoint{Kind: resolve.KindPod, Namespace: "np", Name: "client", IP: netip.MustParseAddr("10.244.1.4"), Node: "tf-node-1"}
	res.Entry = nil
	tf = Record(res, DefaultProbe(), 10*time.Second, "abcde")
	if tf.Spec.Destination.IP != "" || tf.Annotations[labels.ViaAnnotation] != "" || tf.Annotations[labels.EntryAnnotation] != "" {
		t.Errorf("pod to Service: destination %+v, annotations %v; want neither the address nor the entry", tf.Spec.Destination, tf.Annotations)
	}
}

// The sender helper of a trace from outside gets --source-outside and the
// source address, no pod and not --source-node, and reads them back from
// its pod's args; the view names the destination by the address and port
// the packet goes to.
func TestOutsideSourceReachesTheHelper(t *testing.T) {
	res := outsideResult()
	tf := Record(res, DefaultProbe(), 10*time.Second, "abcde")
	p := senderArgs(res, tf)
	if !p.SourceOutside || p.SourceIP != "10.89.0.1" || p.SourcePod != "" || p.SourceNode || p.Destination != "10.89.0.11" || p.TCP != 30080 {
		t.Errorf("senderArgs = %+v: want --source-outside from 10.89.0.1 to 10.89.0.11 TCP 30080, without a pod or --source-node", p)
	}
	pod, err := helperpod.Build(helperpod.Params{TraceName: tf.Name, Namespace: "kube-system", Node: "tf-node-1", Role: helperpod.RoleSender,
		Image: "helper:test", Tag: 7, Timeout: time.Second, Probe: p})
	if err != nil {
		t.Fatal(err)
	}
	got, err := report.Parse(pod.Spec.Containers[0].Args)
	if err != nil {
		t.Fatalf("the helper cannot read %q: %v", pod.Spec.Containers[0].Args, err)
	}
	if q := got.Probe; !q.SourceOutside || q.SourceIP != "10.89.0.1" || q.SourcePod != "" || q.SourceNode {
		t.Errorf("the helper reads %+v: want --source-outside --source-ip 10.89.0.1", q)
	}
	for _, tc := range []struct {
		name string
		res  *resolve.Result
		want string
	}{
		{"from outside", res, "10.89.0.11 (NodePort of np/svc/web)"},
		{"externalIP", func() *resolve.Result {
			r := outsideResult()
			r.Destination.IP, r.Entry = netip.MustParseAddr("10.89.0.50"), &resolve.Entry{How: "externalIP", Via: "tf-node-2"}
			return r
		}(), "10.89.0.50 (externalIP of np/svc/web)"},
		{"from a pod", &resolve.Result{Destination: res.Destination}, "np/svc/web"},
	} {
		if got := destinationName(tc.res); got != tc.want {
			t.Errorf("%s: destinationName = %q, want %q", tc.name, got, tc.want)
		}
	}
	if n := EndpointName(res.Source); n != "10.89.0.1" {
		t.Errorf("EndpointName(source) = %q, want 10.89.0.1", n)
	}
}

// The via node sends; the helpers that receive are the nodes of the
// Service's endpoints other than it.
func TestOutsideSourceReceivers(t *testing.T) {
	for _, tc := range []struct{ endpointNode, want string }{{"tf-node-2", "tf-node-2"}, {"tf-node-1", ""}} {
		t.Run(tc.endpointNode, func(t *testing.T) {
			objs := servedFrom(tc.endpointNode)
			res := outsideResult()
			res.Destination.Namespace, res.Destination.Name = "demo", "echo"
			kube := fake.NewClientset(objs...)
			var notes bytes.Buffer
			r := &Runner{Clients: &Clients{Kube: kube, Lookup: resolve.FromClientset(kube)}, Notes: &notes}
			got, err := r.receiverNodes(context.Background(), res)
			if err != nil {
				t.Fatal(err)
			}
			if got.kind != outcome.DestinationService || strings.Join(got.nodes, ",") != tc.want {
				t.Errorf("kind %s receivers %v; want %s [%s]", got.kind, got.nodes, outcome.DestinationService, tc.want)
			}
		})
	}
}
