package tracerun

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// The helper engine's sender follows an answer to a translated source
// (--reply-translated) only on a round trip to a destination outside the
// pod network, and never from outside the cluster, whose answer leaves by
// the via node's uplink; the rest of its flags are senderArgs' own.
func TestHelperSenderArgsReplyTranslated(t *testing.T) {
	client := resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "client", IP: netip.MustParseAddr("10.244.1.4"), Node: "tf-node-1"}
	node := resolve.Endpoint{Kind: resolve.KindNode, Name: "tf-node-1", IP: netip.MustParseAddr("172.18.0.3"), Node: "tf-node-1"}
	outside := resolve.Endpoint{Kind: resolve.KindIP, IP: netip.MustParseAddr("1.1.1.1")}
	pod := resolve.Endpoint{Kind: resolve.KindPod, Namespace: "default", Name: "web", IP: netip.MustParseAddr("10.244.2.7"), Node: "tf-node-2"}
	svc := resolve.Endpoint{Kind: resolve.KindService, Namespace: "default", Name: "web", IP: netip.MustParseAddr("10.96.0.10")}
	podIP := resolve.Endpoint{Kind: resolve.KindIP, IP: pod.IP}
	result := func(src, dst resolve.Endpoint) *resolve.Result {
		return &resolve.Result{Source: src, Destination: dst, Protocol: traceflow.TCP, DstPort: 443}
	}
	withEntry := func(res *resolve.Result) *resolve.Result {
		res.Entry = &resolve.Entry{How: "NodePort", Via: "tf-node-1"}
		return res
	}
	for _, tc := range []struct {
		name      string
		res       *resolve.Result
		kind      outcome.DestinationKind
		roundTrip bool
		want      bool
	}{
		{"round trip from a pod to outside", result(client, outside), outcome.DestinationOutside, true, true},
		{"round trip from a node to outside", result(node, outside), outcome.DestinationOutside, true, true},
		{"one way from a pod to outside", result(client, outside), outcome.DestinationOutside, false, false},
		{"round trip to a pod", result(client, pod), outcome.DestinationPod, true, false},
		{"round trip to a Service", result(client, svc), outcome.DestinationService, true, false},
		{"round trip to a pod's address", result(client, podIP), outcome.DestinationPodIP, true, false},
		{"round trip from outside to a Service", withEntry(result(resolve.Endpoint{Kind: resolve.KindIP, IP: outside.IP, Node: "tf-node-1"}, svc)),
			outcome.DestinationService, true, false},
		{"round trip from outside, the destination taken as outside", withEntry(result(resolve.Endpoint{Kind: resolve.KindIP, IP: outside.IP, Node: "tf-node-1"}, svc)),
			outcome.DestinationOutside, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tf := Record(tc.res, DefaultProbe(), 10*time.Second, "abcde")
			j := &job{Trace: Trace{Resolved: tc.res, Record: tf}, started: outcome.TraceStarted{DestinationKind: tc.kind}}
			got := helperEngine{options: Options{RoundTrip: tc.roundTrip}}.senderArgs(j)
			want := senderArgs(tc.res, tf)
			want.ReplyTranslated = tc.want
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("helperEngine.senderArgs (-want +got):\n%s", d)
			}
		})
	}
}
