package resolve

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

func TestParseDestination(t *testing.T) {
	tests := []struct {
		in   string
		want Ref
	}{
		{"pod-b", Ref{Kind: KindPod, Name: "pod-b"}},
		{"pod/pod-b", Ref{Kind: KindPod, Name: "pod-b"}},
		{"po/pod-b", Ref{Kind: KindPod, Name: "pod-b"}},
		{"pods/pod-b", Ref{Kind: KindPod, Name: "pod-b"}},
		{"Pod/pod-b", Ref{Kind: KindPod, Name: "pod-b"}},
		{"demo/pod-b", Ref{Kind: KindPod, Namespace: "demo", Name: "pod-b"}},
		{"demo/pod/pod-b", Ref{Kind: KindPod, Namespace: "demo", Name: "pod-b"}},
		{"web.v1-0", Ref{Kind: KindPod, Name: "web.v1-0"}},
		{"svc/web", Ref{Kind: KindService, Name: "web"}},
		{"service/web", Ref{Kind: KindService, Name: "web"}},
		{"services/web", Ref{Kind: KindService, Name: "web"}},
		{"demo/svc/web", Ref{Kind: KindService, Namespace: "demo", Name: "web"}},
		{"svc/pod/x", Ref{Kind: KindPod, Namespace: "svc", Name: "x"}},
		{"10.0.0.5", Ref{Kind: KindIP, IP: netip.MustParseAddr("10.0.0.5")}},
		{"fd00::5", Ref{Kind: KindIP, IP: netip.MustParseAddr("fd00::5")}},
		{"::1", Ref{Kind: KindIP, IP: netip.MustParseAddr("::1")}},
		{"node/worker-1", Ref{Kind: KindNode, Name: "worker-1"}},
		{"no/worker-1", Ref{Kind: KindNode, Name: "worker-1"}},
		{"Nodes/worker-1.example.com", Ref{Kind: KindNode, Name: "worker-1.example.com"}},
		{"node/pod/x", Ref{Kind: KindPod, Namespace: "node", Name: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDestination(tt.in)
			if err != nil {
				t.Fatalf("ParseDestination(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("ParseDestination(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		src   bool
		in    string
		wants []string // substrings: the problem and the fix
	}{
		{"empty", false, "", []string{"empty", "pod name"}},
		{"service as source", true, "svc/web", []string{"is a Service", "give a pod as SRC"}},
		{"malformed IPv4", false, "10.0.0.256", []string{"not a valid IP address", "such as 10.0.0.5"}},
		{"malformed IPv6", false, "fd00:::5", []string{"not a valid IP address", "fd00::5"}},
		{"zone", false, "fe80::1%eth0", []string{"has a zone", "drop it"}},
		{"IPv4-mapped", false, "::ffff:10.0.0.1", []string{"IPv4-mapped", "10.0.0.1 instead"}},
		{"deployment", false, "deploy/web", []string{"not deploy", "pick one of its pods"}},
		{"node in a namespace", false, "demo/node/n1", []string{"belongs to no namespace", "node/n1"}},
		{"bad node name", true, "node/N_1", []string{"not a valid node name", "kubectl get nodes"}},
		{"endpoints", false, "ep/web", []string{"not ep", "pick one of its pods"}},
		{"bad middle", false, "demo/deploy/web", []string{"must be pod or svc", "demo/svc/web"}},
		{"too many slashes", false, "a/b/c/d", []string{"too many '/'", "NAMESPACE/svc/NAME"}},
		{"no name", false, "pod/", []string{"no name", "pod/pod-b"}},
		{"upper case pod", false, "Pod_A", []string{"not a valid pod name", "kubectl get pods"}},
		{"bad namespace", false, "Demo/pod-b", []string{"not a valid namespace name", "kubectl get namespaces"}},
		{"dotted service", false, "svc/web.v1", []string{"not a valid Service name", "kubectl get services"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := ParseDestination
			if tt.src {
				parse = ParseSource
			}
			_, err := parse(tt.in)
			if err == nil {
				t.Fatalf("parse(%q) succeeded", tt.in)
			}
			if code := exitcode.Of(err); code != exitcode.Usage {
				t.Errorf("exit code %d, want %d", code, exitcode.Usage)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"pod-a", "pod/pod-a", "demo/pod-a", "demo/svc/web", "svc/web", "10.0.0.1",
		"fd00::1", "10.0.0.256", "fe80::1%eth0", "a/b/c/d", "deploy/x", "", "/", "::ffff:1.2.3.4", "node/n1", "x/node/n1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, parse := range []func(string) (Ref, error){ParseSource, ParseDestination} {
			r, err := parse(s)
			if err != nil {
				if exitcode.Of(err) != exitcode.Usage {
					t.Fatalf("parse(%q): error without the usage exit code: %v", s, err)
				}
				continue
			}
			// What parses must print back to the same endpoint.
			back, err := ParseDestination(r.String())
			if err != nil {
				t.Fatalf("parse(%q) = %+v, whose String %q does not parse: %v", s, r, r.String(), err)
			}
			if back != r {
				t.Fatalf("round trip of %q: %+v -> %q -> %+v", s, r, r.String(), back)
			}
		}
	})
}
