//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Issue 12, done-when 3: agent mode against the real Antrea v2.3.2 of the
// lab's antrea mode, through the real kubectl, each verdict held to real
// traffic between the same pods where there is traffic.

// agentTrace runs an agent-mode trace (--engine auto) and checks that auto
// chose Antrea, by its health records.
//
// Antrea v2.3.2's agent can lose its result (see lostWrite in
// pkg/plugin/agentmode): when its own log says it did for this trace, the
// plugin must say whose part is missing, and the trace is run once more,
// since what the test holds to real traffic is then missing from Antrea's
// answer, not from the plugin's. Without that line in Antrea's log, nothing
// is run again.
func agentTrace(t *testing.T, args ...string) traceRun {
	t.Helper()
	for run := 1; ; run++ {
		r := runTrace(t, append(args, "--engine", "auto")...)
		if !strings.Contains(r.stderr, "engine: agent (") {
			t.Fatalf("--engine auto did not pick Antrea: %s", r.stderr)
		}
		name := ""
		if r.record != nil {
			name = r.record.Name
		}
		if !antreaLostRun(t, run, name, r.stderr) {
			return r
		}
	}
}

// antreaLostRun reports whether Antrea's agent lost its result for run
// number run of an agent trace (its Traceflow called name, the plugin's
// stderr), so that the run is to be made again: it checks first that the
// plugin said whose part is missing, and fails the test at a second loss
// in a row.
func antreaLostRun(tb testing.TB, run int, name, stderr string) bool {
	tb.Helper()
	line := antreaLostResult(tb, name)
	if line == "" {
		return false
	}
	tb.Logf("Antrea's agent lost its result for this trace (run %d): %s", run, line)
	if !strings.Contains(stderr, "sender's hops are missing") && !strings.Contains(stderr, "only the agent on") {
		tb.Errorf("Antrea lost a result, and the plugin does not say whose part is missing: %s", stderr)
	}
	if run == 2 {
		tb.Fatalf("Antrea lost a result in two traces in a row")
	}
	return true
}

// antreaLostResult is the line of an agent's log that says it failed to
// write its result for the Traceflow called name, or "".
func antreaLostResult(t testing.TB, name string) string {
	t.Helper()
	if name == "" {
		return ""
	}
	for _, n := range labNodes {
		b, err := os.ReadFile(filepath.Join(stateDir(), "logs", n.name+"-antrea-agent.log"))
		if err != nil {
			t.Fatalf("reading the agent's log: %v", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "PacketIn handler failed to process packet") && strings.Contains(line, name) {
				return n.name + ": " + line
			}
		}
	}
	return ""
}

// The engine line says Antrea was picked, and on what evidence: Antrea's
// own health records, not pods.
func TestAntreaAutoPicksAgent(t *testing.T) {
	f := getTraceFixture(t)
	r := agentTrace(t, "-n", f.ns, "a", "b", "--tcp", "80")
	checkAgainstTraffic(t, r, realTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}), "")
	want := "healthy by AntreaControllerInfo and AntreaAgentInfo (heartbeats at most"
	if !strings.Contains(r.stderr, want) {
		t.Errorf("the engine line does not say Antrea's health records decided: %s", r.stderr)
	}
}

// Intra- and inter-node TCP, UDP and ICMP, delivered as real traffic is;
// the path printed sender first.
func TestAntreaDelivered(t *testing.T) {
	f := getTraceFixture(t)
	for _, dst := range []struct{ pod, node string }{{"c", labNodes[0].name}, {"b", labNodes[1].name}} {
		for _, pr := range []struct {
			proto string
			port  int
		}{{"tcp", 80}, {"udp", 5000}, {"icmp", 0}} {
			t.Run(dst.pod+"/"+pr.proto, func(t *testing.T) {
				p := probe{f.ns, "a", pr.proto, f.pods[dst.pod].Status.PodIP, pr.port}
				r := agentTrace(t, append([]string{"-n", f.ns, "a", dst.pod}, protoArgs(p)...)...)
				checkAgainstTraffic(t, r, realTraffic(t, p), "")
				res := r.record.Status.Results
				if len(res) == 0 || res[0].Node != labNodes[0].name || res[0].Role != report.RoleSender {
					t.Errorf("the record's first result must be the sender on %s: %+v", labNodes[0].name, res)
				}
				path := "via " + labNodes[0].name + ";"
				if dst.node != labNodes[0].name {
					path = "via " + labNodes[0].name + " -> " + dst.node + ";"
					if len(res) != 2 || res[1].Role != report.RoleReceiver || res[1].Observations[0].Action != report.ActionReceived {
						t.Errorf("want the receiver second, from Received: %+v", res)
					}
				}
				if !strings.Contains(r.stderr, path) {
					t.Errorf("summary does not print the path sender first (%q): %s", path, r.stderr)
				}
			})
		}
	}
}

// A Service: the LB hop names the endpoint it chose.
func TestAntreaService(t *testing.T) {
	f := getTraceFixture(t)
	clusterIP := strings.TrimSpace(mustKubectl(t, "get", "service", "-n", f.ns, "web", "-o", "jsonpath={.spec.clusterIP}"))
	r := agentTrace(t, "-n", f.ns, "a", "svc/web")
	checkAgainstTraffic(t, r, realTraffic(t, probe{f.ns, "a", "tcp", clusterIP, 80}), "")
	lb := false
	for _, o := range r.result(t, labNodes[0].name).Observations {
		lb = lb || (o.Component == report.ComponentLB && o.TranslatedDstIP == f.pods["b"].Status.PodIP)
	}
	if !lb {
		t.Errorf("no LB hop translating to %s on the sender: %+v", f.pods["b"].Status.PodIP, r.record.Status.Results)
	}
}

// A Kubernetes NetworkPolicy drop: exit 2.
func TestAntreaK8sPolicyDrop(t *testing.T) {
	f := getTraceFixture(t)
	p := probe{f.ns, "a", "tcp", f.pods["locked"].Status.PodIP, 80}
	waitTraffic(t, p, timedOut)
	r := agentTrace(t, "-n", f.ns, "a", "locked", "--tcp", "80")
	checkAgainstTraffic(t, r, realTraffic(t, p), "")
	// Antrea drops a pod isolated by a Kubernetes NetworkPolicy in its
	// IngressDefaultRule table and names no policy there (its
	// packetin.go); the receiver's observation says where.
	if o := last(r.result(t, labNodes[1].name)); o.Action != report.ActionDropped || o.ComponentInfo != "IngressDefaultRule" {
		t.Errorf("last observation %+v, want Dropped in IngressDefaultRule", o)
	}
}

// An Antrea ClusterNetworkPolicy drop names the policy and the rule; an
// Antrea NetworkPolicy Reject is a reject (--expect rejected: exit 0).
func TestAntreaNativePolicies(t *testing.T) {
	f := getTraceFixture(t)
	acnp := "e2e-drop-" + f.ns
	apply(t, antreaDropToPeer(acnp, f.ns)+antreaRejectToWeb(f.ns))
	defer mustKubectl(t, "delete", "clusternetworkpolicies.crd.antrea.io", acnp, "--ignore-not-found")
	defer mustKubectl(t, "delete", "networkpolicies.crd.antrea.io", "-n", f.ns, "reject-web", "--ignore-not-found")

	drop := probe{f.ns, "a", "tcp", f.pods["c"].Status.PodIP, 8080}
	waitTraffic(t, drop, timedOut)
	r := agentTrace(t, "-n", f.ns, "a", "c", "--tcp", "8080")
	checkAgainstTraffic(t, r, realTraffic(t, drop), "")
	if o := last(r.result(t, labNodes[0].name)); o.Action != report.ActionDropped || o.NetworkPolicy != "AntreaClusterNetworkPolicy:"+acnp || o.NetworkPolicyRule != "drop-8080" {
		t.Errorf("last observation %+v, want Dropped by AntreaClusterNetworkPolicy:%s rule drop-8080", o, acnp)
	}
	if !strings.Contains(r.stderr, "AntreaClusterNetworkPolicy:"+acnp+" rule drop-8080") {
		t.Errorf("the verdict does not name the policy and rule: %s", r.stderr)
	}

	reject := probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 8080}
	waitTraffic(t, reject, refused)
	r = agentTrace(t, "-n", f.ns, "a", "b", "--tcp", "8080", "--expect", "rejected")
	checkAgainstTraffic(t, r, realTraffic(t, reject), "rejected")
	if o := last(r.result(t, labNodes[1].name)); o.Action != report.ActionRejected || o.NetworkPolicy != "AntreaNetworkPolicy:"+f.ns+"/reject-web" || o.NetworkPolicyRule != "reject-8080" {
		t.Errorf("last observation %+v, want Rejected by AntreaNetworkPolicy:%s/reject-web rule reject-8080", o, f.ns)
	}
}

// Destinations that are no pod: the source node's gateway, another node's
// IP, and a pod's IP given bare.
func TestAntreaOtherDestinations(t *testing.T) {
	f := getTraceFixture(t)
	gw := netip.MustParsePrefix(labNodes[0].podCIDR).Addr().Next().String()
	for _, tc := range []struct {
		name, dst string
		want      report.Action
	}{
		{"gateway", gw, report.ActionDelivered},
		{"node IP", labNodes[1].ip, report.ActionForwardedOutOfNetwork},
		{"bare pod IP", f.pods["b"].Status.PodIP, report.ActionDelivered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := agentTrace(t, "-n", f.ns, "a", tc.dst, "--icmp")
			real := realTraffic(t, probe{f.ns, "a", "icmp", tc.dst, 0})
			if real != served {
				t.Fatalf("real traffic to %s: %s", tc.dst, real)
			}
			var fates []report.Action
			for _, res := range r.record.Status.Results {
				for _, o := range res.Observations {
					if a := o.Action.Normalize(); a != report.ActionForwarded && a != report.ActionReceived {
						fates = append(fates, a)
					}
				}
			}
			if len(fates) != 1 || fates[0] != tc.want || r.code != 0 {
				t.Errorf("to %s: fates %v exit %d, want %s and exit 0 (real traffic was served)", tc.dst, fates, r.code, tc.want)
			}
		})
	}
}

// --live traces real traffic: the first matching packet the pods send
// after the trace starts; --dropped-only the first one dropped.
func TestAntreaLive(t *testing.T) {
	f := getTraceFixture(t)
	for _, tc := range []struct {
		name   string
		dst    string
		args   []string
		want   string
		expect report.Action
	}{
		{"live", "b", []string{"--live"}, "PASS:", report.ActionDelivered},
		{"dropped only", "locked", []string{"--live", "--dropped-only", "--expect", "dropped"}, "PASS:", report.ActionDropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"traceflow", "-n", f.ns, "a", tc.dst, "--tcp", "80", "--timeout", "30s", "--engine", "auto", "-o", "plain"}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "kubectl", args...)
			cmd.Env = kubectlEnv()
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Real traffic, until the trace has caught a packet of it: the
			// trace cannot say when Antrea's agents are ready to capture.
			done, stopped := make(chan struct{}), make(chan struct{})
			sent := 0
			go func() {
				defer close(stopped)
				url := fmt.Sprintf("http://%s:80/", f.pods[tc.dst].Status.PodIP)
				for {
					select {
					case <-done:
						return
					default:
					}
					c := exec.CommandContext(ctx, "kubectl", "exec", "-n", f.ns, "a", "--", "/workload", "get", "-timeout", "1s", url)
					c.Env = kubectlEnv()
					_ = c.Run() // served or not, it is traffic for the trace to catch
					sent++
				}
			}()
			var lines []string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			werr := cmd.Wait()
			close(done)
			<-stopped
			text := strings.Join(lines, "\n")
			t.Logf("kubectl %s: %v (%d connections sent meanwhile)\n%s", strings.Join(args, " "), werr, sent, text)
			if werr != nil || !strings.Contains(text, tc.want) || !strings.Contains(text, "result="+string(tc.expect)) {
				t.Errorf("live trace: %v, want %s with %s", werr, tc.expect, tc.want)
			}
			if real := realTraffic(t, probe{f.ns, "a", "tcp", f.pods[tc.dst].Status.PodIP, 80}); verdictFor[real] != tc.expect {
				t.Errorf("real traffic was %s, the live trace must say %s", real, verdictFor[real])
			}
		})
	}
}
