//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
)

// helperUse is the most a helper container used: its memory cgroup's high
// watermark and its CPU time, as the kubelet's cgroups account them.
type helperUse struct {
	peakMemory int64
	cpu        time.Duration
	seen       int
}

// sampleHelpers polls the lab's pod cgroups (cgroup v1, the kubelets'
// cgroupRoot tflab/NODE) every 10 ms for containers running
// traceflow-helper and keeps the largest numbers, until stop closes.
func sampleHelpers(stop <-chan struct{}) helperUse {
	var use helperUse
	seen := map[string]bool{}
	for {
		procs, _ := filepath.Glob("/sys/fs/cgroup/memory/tflab/*/kubepods/*/pod*/*/cgroup.procs")
		g, _ := filepath.Glob("/sys/fs/cgroup/memory/tflab/*/kubepods/pod*/*/cgroup.procs")
		for _, p := range append(procs, g...) {
			dir := filepath.Dir(p)
			pids, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			helper := false
			for _, pid := range strings.Fields(string(pids)) {
				comm, _ := os.ReadFile("/proc/" + pid + "/comm")
				helper = helper || strings.HasPrefix(string(comm), "traceflow-helpe")
			}
			if !helper {
				continue
			}
			if !seen[dir] {
				seen[dir] = true
				use.seen++
			}
			if b, err := os.ReadFile(filepath.Join(dir, "memory.max_usage_in_bytes")); err == nil {
				if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > use.peakMemory {
					use.peakMemory = n
				}
			}
			cpuDir := strings.Replace(dir, "/sys/fs/cgroup/memory/", "/sys/fs/cgroup/cpuacct/", 1)
			if b, err := os.ReadFile(filepath.Join(cpuDir, "cpuacct.usage")); err == nil {
				if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && time.Duration(n) > use.cpu {
					use.cpu = time.Duration(n)
				}
			}
		}
		select {
		case <-stop:
			return use
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// What a helper uses while its node forwards traffic: node 1 fetches from
// pod b over HTTP in a loop (through both nodes' OVS and the tunnel) while
// three traces a -> b run. The helper's memory must stay under the limit
// its pod spec sets; the numbers are logged for the README.
func TestHelperResourceUse(t *testing.T) {
	f := getTraceFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	load := exec.CommandContext(ctx, labScript(), "exec", labNodes[0].name, "bash", "-c",
		`n=0; end=$((SECONDS+20)); while [ $SECONDS -lt $end ]; do curl -s -o /dev/null -m 1 http://`+f.pods["b"].Status.PodIP+`/ && n=$((n+1)); done; echo $n`)
	var loadOut bytes.Buffer
	load.Stdout = &loadOut
	loadStart := time.Now()
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var use helperUse
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); use = sampleHelpers(stop) }()
	for range 3 {
		traceAndTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}, "", "-n", f.ns, "a", "b", "--tcp", "80")
	}
	close(stop)
	wg.Wait()
	if err := load.Wait(); err != nil {
		t.Fatalf("load: %v", err)
	}
	served, _ := strconv.Atoi(strings.TrimSpace(loadOut.String()))
	rate := float64(served) / time.Since(loadStart).Seconds()

	res := helperpod.Resources()
	limit := res.Limits.Memory().Value()
	t.Logf("helper containers seen: %d; peak memory %.1f MiB (limit %s, request %s); most CPU time of one helper %s; node 1 meanwhile served %d HTTP fetches from pod b (%.0f/s)",
		use.seen, float64(use.peakMemory)/(1<<20), resource.NewQuantity(limit, resource.BinarySI), res.Requests.Memory(), use.cpu.Round(time.Millisecond), served, rate)
	if use.seen < 2 {
		t.Fatalf("saw %d helper containers in the cgroups, want the sender and receiver of each trace", use.seen)
	}
	if use.peakMemory <= 0 || use.peakMemory >= limit {
		t.Errorf("helper peak memory %d bytes, want above 0 and under the limit %d", use.peakMemory, limit)
	}
	if served == 0 {
		t.Error("no traffic was forwarded during the measurement")
	}
	assertNothingLeft(t)
}
