package cli

import (
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// TestBadInvocations is done-when 3 of issue 2: every bad invocation exits 1
// with a message that names the problem and the fix, and creates nothing.
// Those that need no cluster must not even ask for one.
func TestBadInvocations(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// problem and fix are substrings the message must contain.
		problem, fix string
		// needsCluster is set where only the cluster can tell (a pod that
		// does not exist); all other errors come before any connection.
		needsCluster bool
	}{
		{name: "no arguments", args: nil,
			problem: "missing SRC and DST", fix: "kubectl traceflow pod-a pod-b --tcp 80"},
		{name: "only SRC", args: []string{"pod-a"},
			problem: "missing DST", fix: "name the destination"},
		{name: "extra argument", args: []string{"pod-a", "pod-b", "80"},
			problem: "too many arguments (3", fix: "give exactly SRC and DST"},
		{name: "port zero", args: []string{"pod-a", "pod-b", "--tcp", "0"},
			problem: `invalid argument "0" for "--tcp"`, fix: "a port is a number from 1 to 65535, e.g. --tcp 80"},
		{name: "port too large", args: []string{"pod-a", "pod-b", "--udp", "65536"},
			problem: `invalid argument "65536" for "--udp"`, fix: "e.g. --udp 53"},
		{name: "port not a number", args: []string{"pod-a", "pod-b", "--tcp", "http"},
			problem: `invalid argument "http" for "--tcp"`, fix: "from 1 to 65535"},
		{name: "negative port", args: []string{"pod-a", "pod-b", "--tcp=-1"},
			problem: `invalid argument "-1" for "--tcp"`, fix: "from 1 to 65535"},
		{name: "source port out of range", args: []string{"pod-a", "pod-b", "--tcp", "80", "--src-port", "70000"},
			problem: `invalid argument "70000" for "--src-port"`, fix: "e.g. --src-port 40000"},
		{name: "flag without value", args: []string{"pod-a", "pod-b", "--tcp"},
			problem: "flag needs an argument: --tcp", fix: "see 'kubectl traceflow --help'"},
		{name: "unknown flag", args: []string{"pod-a", "pod-b", "--sctp", "80"},
			problem: "unknown flag: --sctp", fix: "see 'kubectl traceflow --help'"},
		{name: "TCP and UDP", args: []string{"pod-a", "pod-b", "--tcp", "80", "--udp", "53"},
			problem: "--tcp and --udp choose different protocols", fix: "give only one of --tcp PORT, --udp PORT and --icmp"},
		{name: "TCP and ICMP", args: []string{"pod-a", "pod-b", "--icmp", "--tcp", "80"},
			problem: "--tcp and --icmp choose different protocols", fix: "give only one"},
		{name: "timeout zero", args: []string{"pod-a", "pod-b", "--timeout", "0s"},
			problem: `invalid argument "0s" for "--timeout"`, fix: "write e.g. --timeout 30s"},
		{name: "timeout too long", args: []string{"pod-a", "pod-b", "--timeout", "5m1s"},
			problem: "outside 1s to 300s", fix: "--timeout 30s"},
		{name: "timeout not a duration", args: []string{"pod-a", "pod-b", "--timeout", "soon"},
			problem: "not a duration", fix: "--timeout 30s"},
		{name: "timeout not whole seconds", args: []string{"pod-a", "pod-b", "--timeout", "1500ms"},
			problem: "not whole seconds", fix: "--timeout 2s"},
		{name: "unknown engine", args: []string{"pod-a", "pod-b", "--engine", "ebpf"},
			problem: `invalid argument "ebpf" for "--engine"`, fix: "use one of auto, agent, helper"},
		{name: "unknown output", args: []string{"pod-a", "pod-b", "-o", "table"},
			problem: `invalid argument "table" for "-o, --output"`, fix: "use one of plain, wide, json, yaml"},
		{name: "unknown expect", args: []string{"pod-a", "pod-b", "--expect", "maybe"},
			problem: `invalid argument "maybe" for "--expect"`, fix: "use one of delivered, dropped, rejected, refused, any"},
		{name: "unknown color", args: []string{"pod-a", "pod-b", "--color", "sometimes"},
			problem: `invalid argument "sometimes" for "--color"`, fix: "use one of auto, always, never"},
		{name: "malformed IPv4", args: []string{"pod-a", "10.0.0.256"},
			problem: `DST "10.0.0.256" is not a valid IP address`, fix: "such as 10.0.0.5"},
		{name: "malformed IPv6", args: []string{"pod-a", "fd00::5::1"},
			problem: "is not a valid IP address", fix: "such as fd00::5"},
		{name: "IPv4 destination with --ipv6", args: []string{"pod-a", "10.0.0.5", "--ipv6"},
			problem: "DST 10.0.0.5 is an IPv4 address but --ipv6 asks for IPv6", fix: "drop --ipv6"},
		{name: "IPv6 destination with --ipv6=false", args: []string{"pod-a", "fd00::5", "--ipv6=false"},
			problem: "DST fd00::5 is an IPv6 address but --ipv6=false asks for IPv4", fix: "drop --ipv6=false"},
		{name: "TTL zero", args: []string{"pod-a", "pod-b", "--ttl", "0"},
			problem: `invalid argument "0" for "--ttl"`, fix: "e.g. --ttl 64"},
		{name: "TTL too large", args: []string{"pod-a", "pod-b", "--ttl", "256"},
			problem: `invalid argument "256" for "--ttl"`, fix: "from 1 to 255"},
		{name: "bad TCP flags", args: []string{"pod-a", "pod-b", "--tcp", "80", "--tcp-flags", "SYNACK"},
			problem: `invalid argument "SYNACK" for "--tcp-flags"`, fix: "e.g. --tcp-flags SYN,ACK"},
		{name: "TCP flags without TCP", args: []string{"pod-a", "pod-b", "--udp", "53", "--tcp-flags", "SYN"},
			problem: "--tcp-flags needs a TCP probe", fix: "add --tcp PORT"},
		{name: "source port with ICMP", args: []string{"pod-a", "pod-b", "--src-port", "4000"},
			problem: "--src-port needs a TCP or UDP probe", fix: "add --tcp PORT or --udp PORT"},
		{name: "dropped-only without live", args: []string{"pod-a", "pod-b", "--dropped-only"},
			problem: "--dropped-only applies to live traffic only", fix: "add --live"},
		{name: "ICMP to a Service", args: []string{"pod-a", "svc/web", "--icmp"},
			problem: "load-balances ports, not ICMP", fix: "drop --icmp"},
		{name: "Service as source", args: []string{"svc/web", "pod-b"},
			problem: "is a Service, but a probe starts in a pod", fix: "give a pod as SRC"},
		{name: "same pod twice", args: []string{"pod-a", "pod/pod-a"},
			problem: "SRC and DST are the same pod", fix: "trace to another pod"},
		{name: "invalid pod name", args: []string{"Pod_A", "pod-b"},
			problem: `"Pod_A" is not a valid pod name`, fix: "kubectl get pods"},
		{name: "a deployment", args: []string{"pod-a", "deploy/web"},
			problem: "traces pods, Services and nodes, not deploy", fix: "pick one of its pods"},
		{name: "server-side dry run", args: []string{"pod-a", "pod-b", "--dry-run=server"},
			problem: "no server-side dry run", fix: "use --dry-run"},
		{name: "bad helper image digest", args: []string{"pod-a", "pod-b", "--helper-image", "reg.local/helper@sha256:abc"},
			problem: "--helper-image: image", fix: "64 lowercase hex digits"},
		{name: "relative OVS run directory", args: []string{"pod-a", "pod-b", "--ovs-rundir", "run/openvswitch"},
			problem: "--ovs-rundir: the OVS run directory \"run/openvswitch\" is not an absolute path", fix: "e.g. /var/run/openvswitch"},
		{name: "unclean OVS run directory", args: []string{"pod-a", "pod-b", "--ovs-rundir", "/var/run/../../etc"},
			problem: "is not a clean path", fix: "write /etc"},
		{name: "version with an argument", args: []string{"version", "now"},
			problem: "takes no arguments", fix: "kubectl traceflow version --help"},
		{name: "source pod not found", args: []string{"nope", "pod-b", "--tcp", "80"}, needsCluster: true,
			problem: "source pod default/nope not found", fix: "kubectl get pods -n default"},
		{name: "destination pod not Running", args: []string{"pod-a", "pending"}, needsCluster: true,
			problem: "is Pending, not Running", fix: "wait until it runs"},
		{name: "no IPv6 on a pod", args: []string{"-n", "demo", "pod-c", "default/pod-b", "--ipv6"}, needsCluster: true,
			problem: "has no IPv6 address (it has 10.244.2.8)", fix: "drop --ipv6"},
		{name: "TCP flags to a Service whose first port is UDP", args: []string{"pod-a", "svc/dns", "--tcp-flags", "SYN"}, needsCluster: true,
			problem: "Service default/dns's first port is UDP 53", fix: "give --tcp PORT"},
		{name: "headless Service", args: []string{"pod-a", "svc/headless"}, needsCluster: true,
			problem: "is headless", fix: "trace to one of its pods"},
		{name: "port the Service does not expose", args: []string{"pod-a", "svc/web", "--tcp", "8080"}, needsCluster: true,
			problem: "does not expose TCP port 8080 (it exposes TCP 80 (http))", fix: "e.g. --tcp 80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// --dry-run off: a bad invocation must fail before the point
			// where a real run would create something.
			res := runCommand(t, tt.args, demoCluster()...)
			if code := exitcode.Of(res.err); code != exitcode.Usage {
				t.Fatalf("exit code %d (%v), want %d", code, res.err, exitcode.Usage)
			}
			msg := res.err.Error()
			if !strings.Contains(msg, tt.problem) {
				t.Errorf("message %q does not name the problem %q", msg, tt.problem)
			}
			if !strings.Contains(msg, tt.fix) {
				t.Errorf("message %q does not give the fix %q", msg, tt.fix)
			}
			if res.connected && !tt.needsCluster {
				t.Error("a usage error that needs no cluster asked for cluster clients")
			}
			if w := res.writes(); len(w) > 0 {
				t.Errorf("a failed validation created something: %v", w)
			}
			if res.stdout != "" {
				t.Errorf("printed to stdout: %q", res.stdout)
			}
		})
	}
	if len(tests) < 25 {
		t.Errorf("only %d bad invocations; issue 2 asks for at least 25", len(tests))
	}
}
