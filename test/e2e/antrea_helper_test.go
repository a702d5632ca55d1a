//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Issue 14, done-when 3: helper mode next to the real Antrea creates
// nothing an Antrea agent acts on, and a helper trace and an Antrea trace
// running at the same time are both right.

// antreaTraceflowCategory is the category Antrea's agent writes into bits
// 40-47 of the cookie of every flow it installs for a Traceflow (its
// cookie.Traceflow); the helper's own cookies start with 0x7466.
const antreaTraceflowCategory = 7

// antreaTraceflowFlows lists the flows Antrea's agent installed on node's
// br-int for a Traceflow. Without a testing.TB: it also runs in a sampler
// goroutine.
func antreaTraceflowFlows(node string) (string, error) {
	out, err := exec.Command(labScript(), "exec", node, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("dump-flows on %s: %w\n%s", node, err, out)
	}
	var flows []string
	for _, l := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "cookie=")
		if !ok {
			continue
		}
		c, err := strconv.ParseUint(strings.TrimPrefix(strings.SplitN(rest, ",", 2)[0], "0x"), 16, 64)
		if err != nil {
			return "", fmt.Errorf("dump-flows on %s: cookie of %q: %w", node, l, err)
		}
		if c>>48 != 0x7466 && (c>>40)&0xff == antreaTraceflowCategory {
			flows = append(flows, strings.TrimSpace(l))
		}
	}
	return strings.Join(flows, "\n"), nil
}

// noAntreaTraceflowFlows waits until no node holds an Antrea Traceflow
// flow (an earlier test's Antrea trace may still be cleaning up).
func noAntreaTraceflowFlows(t *testing.T) {
	t.Helper()
	eventually(t, 30*time.Second, "no Antrea Traceflow flows on any node", func() error {
		for _, n := range labNodes {
			flows, err := antreaTraceflowFlows(n.name)
			if err != nil {
				return err
			}
			if flows != "" {
				return fmt.Errorf("on %s:\n%s", n.name, flows)
			}
		}
		return nil
	})
}

// agentLog is the path of node's antrea-agent log, which the lab keeps.
func agentLog(node string) string {
	return filepath.Join(stateDir(), "logs", node+"-antrea-agent.log")
}

// logSize is where node's agent log ends now.
func logSize(t *testing.T, node string) int64 {
	t.Helper()
	st, err := os.Stat(agentLog(node))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// traceflowActivity returns the lines node's agent logged since offset
// from its Traceflow code (traceflow_controller.go, packetin.go) or naming
// trace.
func traceflowActivity(t *testing.T, node string, offset int64, trace string) []string {
	t.Helper()
	b, err := os.ReadFile(agentLog(node))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) < offset {
		t.Fatalf("%s shrank (%d bytes, was %d): the agent restarted", agentLog(node), len(b), offset)
	}
	var out []string
	for _, l := range strings.Split(string(b[offset:]), "\n") {
		if strings.Contains(l, "traceflow_controller.go") || strings.Contains(l, "packetin.go") || (trace != "" && strings.Contains(l, trace)) {
			out = append(out, l)
		}
	}
	return out
}

// helperTag checks that a helper trace's tag is one of the helper pool's,
// never one of Antrea's.
func helperTag(t *testing.T, r traceRun) {
	t.Helper()
	if r.record == nil {
		t.Fatal("no record")
	}
	tag := uint8(r.record.Status.DataplaneTag) //nolint:gosec // a DSCP tag
	if !slices.Contains(tagalloc.Pool(), tag) || slices.Contains(tagalloc.AntreaPool(), tag) {
		t.Errorf("helper trace's tag %d: want one of the helper pool %v, none of Antrea's %v", tag, tagalloc.Pool(), tagalloc.AntreaPool())
	}
}

// An Antrea trace that stays running (--live: Antrea's agents hold its
// flows until real traffic matches them), and a helper trace run to its
// end meanwhile: the helper trace agrees with real traffic, the Antrea
// trace is still running when it ends (they overlapped), and then real
// traffic ends the Antrea trace with the verdict real traffic met. The two
// tags come from disjoint pools.
func TestAntreaHelperNextToAntreaTrace(t *testing.T) {
	f := getTraceFixture(t)
	noAntreaTraceflowFlows(t)
	n1 := labNodes[0].name
	offset := logSize(t, n1)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	live := exec.CommandContext(ctx, "kubectl", "traceflow", "-n", f.ns, "a", "c", "--tcp", "80", "--live", "--timeout", "60s",
		"--engine", "agent", "-o", "json")
	live.Env = kubectlEnv()
	var liveOut, liveErr bytes.Buffer
	live.Stdout, live.Stderr = &liveOut, &liveErr
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	liveDone := make(chan error, 1)
	go func() { liveDone <- live.Wait() }()
	defer func() {
		if live.ProcessState == nil {
			_ = live.Process.Kill()
			<-liveDone
		}
	}()
	// Antrea's agent on the source node installs the live trace's flows:
	// what the other test holds absent is seen here.
	eventually(t, 30*time.Second, "Antrea's agent to install the live trace's flows on "+n1, func() error {
		select {
		case err := <-liveDone:
			liveDone <- err
			return fmt.Errorf("the Antrea trace ended early: %w\n%s%s", err, liveErr.String(), liveOut.String())
		default:
		}
		flows, err := antreaTraceflowFlows(n1)
		if err == nil && flows == "" {
			err = errors.New("none yet")
		}
		return err
	})

	p := probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}
	r := runTrace(t, "-n", f.ns, "a", "b", "--tcp", "80", "--engine", "helper")
	checkAgainstTraffic(t, r, realTraffic(t, p), "")
	helperTag(t, r)
	select {
	case err := <-liveDone:
		liveDone <- err
		t.Fatalf("the Antrea trace ended before the helper trace did (they did not overlap): %v\n%s", err, liveErr.String())
	default:
	}
	if flows, err := antreaTraceflowFlows(n1); err != nil || flows == "" {
		t.Fatalf("the Antrea trace's flows are gone before its end (%v): they did not overlap", err)
	}

	// Real traffic a -> c ends the live trace.
	var sent int
	url := fmt.Sprintf("http://%s:80/", f.pods["c"].Status.PodIP)
	var werr error
	for waiting := true; waiting; {
		select {
		case werr = <-liveDone:
			waiting = false
		case <-ctx.Done():
			t.Fatalf("the Antrea trace did not end within 90 s (%d connections sent)\n%s", sent, liveErr.String())
		default:
			c := exec.CommandContext(ctx, "kubectl", "exec", "-n", f.ns, "a", "--", "/workload", "get", "-timeout", "1s", url)
			c.Env = kubectlEnv()
			_ = c.Run() // served or not, it is traffic for the trace to catch
			sent++
		}
	}
	ar := traceRun{stdout: liveOut.String(), stderr: liveErr.String()}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		ar.code = ee.ExitCode()
	} else if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("Antrea trace (--live, %d connections sent): exit %d\n%s%s", sent, ar.code, ar.stderr, ar.stdout)
	if !strings.Contains(ar.stderr, "engine: agent (") {
		t.Fatalf("the live trace was not Antrea's: %s", ar.stderr)
	}
	ar.record = &traceflow.Traceflow{}
	if err := json.Unmarshal([]byte(ar.stdout), ar.record); err != nil {
		t.Fatalf("-o json is not a Traceflow: %v", err)
	}
	checkAgainstTraffic(t, ar, realTraffic(t, probe{f.ns, "a", "tcp", f.pods["c"].Status.PodIP, 80}), "")
	if tag := uint8(ar.record.Status.DataplaneTag); !slices.Contains(tagalloc.AntreaPool(), tag) { //nolint:gosec // a DSCP tag
		t.Errorf("Antrea's trace carried tag %d, not one of Antrea's pool %v", tag, tagalloc.AntreaPool())
	}
	// What the other test holds absent: Antrea's agent logs its Traceflow
	// work, naming the trace.
	if len(traceflowActivity(t, n1, offset, ar.record.Name)) == 0 {
		t.Errorf("%s's agent logged nothing of Antrea's trace %s: the log check of the other test could not see activity", n1, ar.record.Name)
	}
}

// With Antrea's controller stopped (lab.sh antrea-controller stop), a
// helper-mode trace across both nodes creates no Traceflow object, so
// Antrea's agents do nothing: neither agent logs any Traceflow work and no
// Antrea Traceflow flow appears on either br-int, while it runs or after.
// The trace itself agrees with real traffic, and its first line says the
// record stays in the plugin. Resumed, the controller runs Antrea's traces
// again.
func TestAntreaHelperWithControllerStopped(t *testing.T) {
	f := getTraceFixture(t)
	noAntreaTraceflowFlows(t)
	if out, err := exec.Command(labScript(), "antrea-controller", "stop").CombinedOutput(); err != nil {
		t.Fatalf("lab.sh antrea-controller stop: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(labScript(), "antrea-controller", "start").CombinedOutput(); err != nil {
			t.Errorf("lab.sh antrea-controller start: %v\n%s", err, out)
		}
	})
	offsets := map[string]int64{}
	for _, n := range labNodes {
		offsets[n.name] = logSize(t, n.name)
	}

	// Antrea's flows are sampled while the trace runs, not only after.
	stop := make(chan struct{})
	var mu sync.Mutex
	var seen, sampleErrs []string
	samples := 0
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, n := range labNodes {
				flows, err := antreaTraceflowFlows(n.name)
				mu.Lock()
				samples++
				if err != nil {
					sampleErrs = append(sampleErrs, err.Error())
				} else if flows != "" {
					seen = append(seen, n.name+":\n"+flows)
				}
				mu.Unlock()
			}
		}
	}()
	r := runTrace(t, "-n", f.ns, "a", "b", "--tcp", "80", "--engine", "helper")
	close(stop)
	wg.Wait()

	checkAgainstTraffic(t, r, realTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}), "")
	helperTag(t, r)
	if !strings.Contains(r.stderr, "the record stays in the plugin (see -o yaml)") {
		t.Errorf("the engine line does not say the record stays in the plugin: %s", r.stderr)
	}
	name := r.record.Name
	if out := mustKubectl(t, "get", "traceflows.crd.antrea.io", "-o", "name"); strings.Contains(out, "/"+name+"\n") {
		t.Errorf("the helper trace left a Traceflow object %s", name)
	}
	t.Logf("%d samples of the nodes' flows while the trace ran", samples)
	if len(sampleErrs) > 0 {
		t.Errorf("sampling the flows failed: %s", strings.Join(sampleErrs, "\n"))
	}
	if samples < 2 {
		t.Errorf("only %d samples of the flows while the trace ran", samples)
	}
	if len(seen) > 0 {
		t.Errorf("Antrea Traceflow flows while the helper trace ran:\n%s", strings.Join(seen, "\n"))
	}
	for _, n := range labNodes {
		if flows, err := antreaTraceflowFlows(n.name); err != nil || flows != "" {
			t.Errorf("Antrea Traceflow flows on %s after the trace (%v):\n%s", n.name, err, flows)
		}
		if lines := traceflowActivity(t, n.name, offsets[n.name], name); len(lines) > 0 {
			t.Errorf("%s's agent logged Traceflow work during the helper trace %s:\n%s", n.name, name, strings.Join(lines, "\n"))
		}
	}

	// Resumed, the controller runs Antrea's traces again (it allocates
	// their tags): the lab is as it was for the tests that follow.
	if out, err := exec.Command(labScript(), "antrea-controller", "start").CombinedOutput(); err != nil {
		t.Fatalf("lab.sh antrea-controller start: %v\n%s", err, out)
	}
	ar := agentTrace(t, "-n", f.ns, "a", "c", "--tcp", "80")
	checkAgainstTraffic(t, ar, realTraffic(t, probe{f.ns, "a", "tcp", f.pods["c"].Status.PodIP, 80}), "")
}
