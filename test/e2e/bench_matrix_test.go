//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The bench's matrix: benchMatrixPods pods over both nodes, every pod to
// every other on TCP 80 and 8080 (15 x 14 x 2 = 420 cells).
const (
	benchMatrixPods  = 15
	benchMatrixCells = benchMatrixPods * (benchMatrixPods - 1) * 2
)

// matrixStats is what one matrix run measured: the time to its exit, its
// own summary line (the first cell's time, the cost of a cell after it,
// its API requests) and the helpers' peak memory.
type matrixStats struct {
	took       time.Duration
	summary    string
	peakMemory int64
}

// benchMatrixNamespace makes the bench's namespace: the pods alternate
// between the nodes, under a default deny and two allow rules (web from
// client on 80, anything from web on 8080).
func benchMatrixNamespace(b *testing.B) string {
	ns := namespace(b, "bench-matrix")
	var m strings.Builder
	names := make([]string, benchMatrixPods)
	for i := range benchMatrixPods {
		names[i] = fmt.Sprintf("p%02d", i)
		app := "client"
		if i%3 == 0 {
			app = "web"
		}
		m.WriteString(podSpec(ns, names[i], labNodes[i%len(labNodes)].name, map[string]string{"app": app}))
	}
	m.WriteString(denyIngress(ns, "deny-all", "") +
		netpol{ns: ns, name: "allow-web", app: "web", ingress: []string{tcpRule("from: [{podSelector: {matchLabels: {app: client}}}]", 80)}}.yaml() +
		netpol{ns: ns, name: "allow-from-web", ingress: []string{tcpRule("from: [{podSelector: {matchLabels: {app: web}}}]", 8080)}}.yaml())
	apply(b, m.String())
	waitPods(b, ns, names...)
	return ns
}

// timeMatrix runs the bench's matrix once, with extra flags, sampling the
// helpers' memory meanwhile.
func timeMatrix(ns string, extra ...string) (matrixStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := append([]string{"traceflow", "matrix", "-n", ns, "--port", "tcp/80", "--port", "tcp/8080", "-o", "json"}, extra...)
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = kubectlEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stop := make(chan struct{})
	use := make(chan helperUse, 1)
	go func() { use <- sampleHelpers(stop) }()
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	close(stop)
	u := <-use
	if err != nil {
		return matrixStats{}, fmt.Errorf("kubectl traceflow matrix: %w\n%s", err, stderr.String())
	}
	if n := strings.Count(string(out), "\n"); n != benchMatrixCells {
		return matrixStats{}, fmt.Errorf("%d cells reported, want %d", n, benchMatrixCells)
	}
	return matrixStats{took: took, summary: strings.TrimSpace(stderr.String()), peakMemory: u.peakMemory}, nil
}
