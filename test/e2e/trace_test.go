//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// traceFixture: a and c on node 1, b and locked on node 2, Service web in
// front of b, and a NetworkPolicy denying all ingress to locked.
type traceFixture struct {
	ns   string
	pods map[string]*corev1.Pod
}

var (
	traceFix     *traceFixture
	traceFixOnce sync.Mutex
)

func getTraceFixture(t testing.TB) *traceFixture {
	t.Helper()
	requireLab(t)
	traceFixOnce.Lock()
	defer traceFixOnce.Unlock()
	if traceFix != nil {
		return traceFix
	}
	ns := fmt.Sprintf("e2e-trace-%d", time.Now().UnixNano()%100000)
	createNamespace(t, ns)
	mustKubectl(t, "traceflow", "install")
	apply(t, podSpec(ns, "a", labNodes[0].name, map[string]string{"app": "client"})+
		podSpec(ns, "c", labNodes[0].name, map[string]string{"app": "peer"})+
		podSpec(ns, "b", labNodes[1].name, map[string]string{"app": "web"})+
		podSpec(ns, "locked", labNodes[1].name, map[string]string{"app": "locked"})+
		serviceSpec(ns, "web", "web", http80)+
		denyIngress(ns, "deny-locked", "locked"))
	traceFix = &traceFixture{ns: ns, pods: waitPods(t, ns, "a", "b", "c", "locked")}
	return traceFix
}

func TestTraceIntraNodeDelivered(t *testing.T) {
	f := getTraceFixture(t)
	for _, proto := range []struct {
		name string
		port int
	}{{"tcp", 80}, {"udp", 5000}, {"icmp", 0}} {
		t.Run("--"+proto.name, func(t *testing.T) {
			p := probe{f.ns, "a", proto.name, f.pods["c"].Status.PodIP, proto.port}
			r, _ := traceAndTraffic(t, p, "", append([]string{"-n", f.ns, "a", "c"}, protoArgs(p)...)...)
			if r.code != 0 {
				t.Fatalf("exit %d, want 0", r.code)
			}
			sender := r.result(t, labNodes[0].name)
			if o := last(sender); o.Action != report.ActionDelivered || o.Pod != f.ns+"/c" {
				t.Errorf("last observation %+v, want Delivered to %s/c", o, f.ns)
			}
			assertNothingLeft(t)
		})
	}
}

func TestTraceInterNodeDelivered(t *testing.T) {
	f := getTraceFixture(t)
	r, _ := traceAndTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}, "", "-n", f.ns, "a", "b", "--tcp", "80", "--keep")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	sender := r.result(t, labNodes[0].name)
	if o := last(sender); o.Action != report.ActionForwarded || o.TunnelDstIP != labNodes[1].ip {
		t.Errorf("sender's last observation %+v, want Forwarded with tunnelDstIP %s", o, labNodes[1].ip)
	}
	recv := r.result(t, labNodes[1].name)
	if len(recv.Observations) < 2 || recv.Observations[0].Action != report.ActionReceived || last(recv).Action != report.ActionDelivered {
		t.Errorf("receiver observations %+v, want Received first and Delivered last", recv.Observations)
	}
	name := r.record.Name
	if labMode() == modeAntrea {
		// Where Antrea runs, its controller would act on a Traceflow
		// object: --keep keeps the record in the plugin's output only,
		// and says so (issue 14).
		if !strings.Contains(r.stderr, "the record stays in the plugin") {
			t.Errorf("the plugin does not say where the record is kept: %s", r.stderr)
		}
		if out, err := kubectl(context.Background(), "get", "traceflow", name, "-o", "name"); err == nil {
			t.Errorf("helper mode wrote Traceflow %s where Antrea runs: %s", name, out)
		}
		assertNothingLeft(t, name)
		return
	}
	// --keep: the CR holds the merged per-node results.
	kept := &traceflow.Traceflow{}
	if err := json.Unmarshal([]byte(mustKubectl(t, "get", "traceflow", name, "-o", "json")), kept); err != nil {
		t.Fatal(err)
	}
	if kept.Status.Phase != traceflow.PhaseSucceeded || len(kept.Status.Results) != 2 {
		t.Errorf("kept record: phase %s, %d results", kept.Status.Phase, len(kept.Status.Results))
	}
	// The kept record says what -o json says: on Antrea's pipeline (the
	// lab's imitation names its tables as Antrea does) Antrea's summary as
	// observations, every table hop in tableHops (issue 14).
	if d := cmp.Diff(r.record.Status.Results, kept.Status.Results); d != "" {
		t.Errorf("the kept record's results differ from -o json's (-json +kept):\n%s", d)
	}
	// Never a state Antrea's agents act on (Running with a tag): the stored
	// status has no tag, the annotation carries it (issue 14).
	if tag := fmt.Sprint(r.record.Status.DataplaneTag); kept.Status.DataplaneTag != 0 || kept.Annotations[labels.TagAnnotation] != tag {
		t.Errorf("kept record: status.dataplaneTag %d, annotation %s=%q; want no status tag and the annotation %s",
			kept.Status.DataplaneTag, labels.TagAnnotation, kept.Annotations[labels.TagAnnotation], tag)
	}
	assertNothingLeft(t, name)
	mustKubectl(t, "delete", "traceflow", name)
}

func TestTraceServiceLoadBalanced(t *testing.T) {
	f := getTraceFixture(t)
	clusterIP := strings.TrimSpace(mustKubectl(t, "get", "service", "-n", f.ns, "web", "-o", "jsonpath={.spec.clusterIP}"))
	r, _ := traceAndTraffic(t, probe{f.ns, "a", "tcp", clusterIP, 80}, "", "-n", f.ns, "a", "svc/web")
	if r.code != 0 {
		t.Fatalf("exit %d, want 0", r.code)
	}
	lb := false
	for _, o := range r.result(t, labNodes[0].name).Observations {
		if o.Component == report.ComponentLB && o.TranslatedDstIP == f.pods["b"].Status.PodIP {
			lb = true
		}
	}
	if !lb {
		t.Errorf("no LB observation with translatedDstIP %s (the endpoint)", f.pods["b"].Status.PodIP)
	}
	assertNothingLeft(t)
}

func TestTraceNetworkPolicyDrop(t *testing.T) {
	f := getTraceFixture(t)
	r, _ := traceAndTraffic(t, probe{f.ns, "a", "tcp", f.pods["locked"].Status.PodIP, 80}, "", "-n", f.ns, "a", "locked", "--tcp", "80")
	if r.code != 2 {
		t.Fatalf("exit %d, want 2 (dropped)", r.code)
	}
	var drop *report.Observation
	for _, res := range r.record.Status.Results {
		for i, o := range res.Observations {
			if o.Action == report.ActionDropped {
				drop = &res.Observations[i]
			}
		}
	}
	if drop == nil || drop.Component != report.ComponentNetworkPolicy {
		t.Fatalf("no NetworkPolicy drop in %+v", r.record.Status.Results)
	}
	if drop.NetworkPolicy != f.ns+"/deny-locked" || !strings.Contains(drop.NetworkPolicyRule, "ingress default deny") {
		t.Errorf("the drop does not name the policy and its rule: %+v", drop)
	}
	assertNothingLeft(t)
}

func TestTraceMissingPodCreatesNothing(t *testing.T) {
	f := getTraceFixture(t)
	r := runTrace(t, "-n", f.ns, "a", "no-such-pod", "--tcp", "80")
	if r.code != 1 || !strings.Contains(r.stderr, "no-such-pod") {
		t.Fatalf("exit %d (want 1), stderr %q", r.code, r.stderr)
	}
	// A node that does not exist, as SRC and as DST (issue 26).
	for _, args := range [][]string{{"node/no-such-node", "a"}, {"a", "node/no-such-node"}} {
		r := runTrace(t, append([]string{"-n", f.ns}, args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "node no-such-node not found") || !strings.Contains(r.stderr, "kubectl get nodes") {
			t.Errorf("%v: exit %d (want 1), stderr %q", args, r.code, r.stderr)
		}
	}
	assertNothingLeft(t)
}

func TestTraceNodeWithoutOVS(t *testing.T) {
	f := getTraceFixture(t)
	start := time.Now()
	r := runTrace(t, "-n", f.ns, "a", "c", "--tcp", "80", "--ovs-rundir", "/var/run/no-ovs-here")
	if r.code != 4 || !strings.Contains(r.stderr, labNodes[0].name) || !strings.Contains(r.stderr, "Open vSwitch") {
		t.Fatalf("exit %d (want 4 naming the node and OVS), stderr %q", r.code, r.stderr)
	}
	t.Logf("failed in %s", time.Since(start).Round(time.Millisecond))
	assertNothingLeft(t)
}

// Eight traces at once: all finish with correct verdicts and distinct tags.
func TestTraceEightConcurrent(t *testing.T) {
	f := getTraceFixture(t)
	type job struct{ dst, proto string }
	jobs := []job{{"b", "80"}, {"c", "80"}, {"locked", "80"}, {"b", "8080"}, {"c", "8080"}, {"svc/web", "80"}, {"locked", "8080"}, {"b", "80"}}
	var args [][]string
	for _, j := range jobs {
		args = append(args, []string{"-n", f.ns, "a", j.dst, "--tcp", j.proto})
	}
	runs := runTracesAtOnce(t, args...)
	// Real traffic for each job afterwards, one at a time: the oracle, not
	// part of the load.
	clusterIP := strings.TrimSpace(mustKubectl(t, "get", "service", "-n", f.ns, "web", "-o", "jsonpath={.spec.clusterIP}"))
	for i, j := range jobs {
		dst := clusterIP
		if p, ok := f.pods[j.dst]; ok {
			dst = p.Status.PodIP
		}
		port, _ := strconv.Atoi(j.proto)
		if j.dst == "svc/web" && port != 80 {
			continue // web serves only port 80
		}
		t.Run(fmt.Sprintf("real-%d-%s-%s", i, strings.ReplaceAll(j.dst, "/", "-"), j.proto), func(t *testing.T) {
			checkAgainstTraffic(t, runs[i], realTraffic(t, probe{f.ns, "a", "tcp", dst, port}), "")
		})
	}
	tags := map[int8]string{}
	for i, r := range runs {
		want := 0
		if jobs[i].dst == "locked" {
			want = 2
		}
		if r.code != want {
			t.Errorf("trace %d (a -> %s TCP %s): exit %d, want %d", i, jobs[i].dst, jobs[i].proto, r.code, want)
			continue
		}
		if other, ok := tags[r.record.Status.DataplaneTag]; ok {
			t.Errorf("traces %s and %d share tag %d", other, i, r.record.Status.DataplaneTag)
		}
		tags[r.record.Status.DataplaneTag] = fmt.Sprint(i)
	}
	assertNothingLeft(t)
}

// Issue 7, done-when 4: kubectl completes the plugin's arguments through
// kubectl_complete-traceflow (shipped in the release archives), which asks
// the plugin's __complete; the lab's pods come back.
func TestCompletionThroughKubectl(t *testing.T) {
	f := getTraceFixture(t)
	cmd := exec.Command("kubectl", "__complete", "traceflow", "-n", f.ns, "a", "")
	env := kubectlEnv()
	for i, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			env[i] = "PATH=" + filepath.Join(repoRoot(), "hack", "completion") + ":" + strings.TrimPrefix(e, "PATH=")
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl __complete: %v\n%s", err, out)
	}
	for _, want := range []string{"\nb\n", "\nlocked\n", "svc/web"} {
		if !strings.Contains("\n"+string(out), want) {
			t.Errorf("completions lack %q:\n%s", strings.TrimSpace(want), out)
		}
	}
}
