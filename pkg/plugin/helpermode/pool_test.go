package helpermode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// serveCluster plays the kubelets and `traceflow-helper serve`: a server
// pod runs at once; commands on its standard input start fake traces whose
// lines carry their id. A receiver reports the probe once its trace's
// sender injected, and waits for its stop; a sender reports and ends.
type serveCluster struct {
	fakeWatches
	mu      sync.Mutex
	created []*corev1.Pod
	deleted []string
	logs    map[string]*io.PipeWriter
	readers map[string]*io.PipeReader
	// injected is closed per trace name once its sender has injected.
	injected map[string]chan struct{}
	// commands counts each server's commands by kind ("receive", "trace",
	// "stop"); stdinEnded lists the servers whose input ended.
	commands   map[string]int
	stdinEnded []string
	// failPod, when set, is an event reason the kubelet sends for every
	// server pod instead of starting it.
	failPod   string
	attachErr error
	// logText, when set, is every server's log (one that ended before
	// the attach).
	logText string
	// firstLost plays an attach that connected after the server's first
	// serving line: only the answer to a hello, helloAfter later, says it
	// serves; commands that come before that answer are counted in early.
	firstLost  bool
	helloAfter time.Duration
	early      int
	// together, when set, holds every sender until that many receivers
	// were started: the traces then overlap, as a suite's do.
	together int
	cond     *sync.Cond
}

func newServeCluster() *serveCluster {
	f := &serveCluster{fakeWatches: fakeWatches{pods: newChanWatch(), events: newChanWatch()}, logs: map[string]*io.PipeWriter{},
		readers: map[string]*io.PipeReader{}, injected: map[string]chan struct{}{}, commands: map[string]int{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *serveCluster) CreatePod(_ context.Context, p *corev1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p = p.DeepCopy()
	f.created = append(f.created, p)
	r, w := io.Pipe()
	f.logs[p.Name], f.readers[p.Name] = w, r
	if f.failPod != "" {
		f.events.ch <- watch.Event{Type: watch.Added, Object: &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: p.Name},
			Reason: f.failPod, Message: "MountVolume.SetUp failed for volume \"ovs-run\": hostPath type check failed: /var/run/openvswitch is not a directory"}}
		return nil
	}
	running := p.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: helperpod.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	f.pods.ch <- watch.Event{Type: watch.Modified, Object: running}
	return nil
}

func (f *serveCluster) StopPods(context.Context, string, string) error {
	return errors.New("a shared helper is never stopped by trace")
}

func (f *serveCluster) DeletePods(_ context.Context, _, trace string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, trace)
	return nil
}

func (f *serveCluster) Logs(_ context.Context, _, pod string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logText != "" {
		return io.NopCloser(strings.NewReader(f.logText)), nil
	}
	r, ok := f.readers[pod]
	if !ok {
		return nil, fmt.Errorf("no pod %s", pod)
	}
	return r, nil
}

func (f *serveCluster) node(pod string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.created {
		if p.Name == pod {
			return p.Spec.NodeName
		}
	}
	return ""
}

// Attach plays the server: it serves until its standard input ends, then
// stops what still runs and ends its log.
func (f *serveCluster) Attach(_ context.Context, _, pod string, stdin io.Reader, stdout, _ io.Writer) error {
	if f.attachErr != nil {
		return f.attachErr
	}
	w := stdout
	node := f.node(pod)
	var wmu sync.Mutex
	write := func(id string, l report.Line) {
		l.Version, l.Trace = report.SchemaVersion, id
		b, _ := json.Marshal(l)
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = w.Write(append(b, '\n'))
	}
	serving := func() {
		write("", report.Line{Type: report.TypeServing, Serving: &report.Serving{HelperVersion: "v-test"}})
	}
	answered := make(chan struct{})
	if !f.firstLost {
		serving()
		close(answered)
	}
	stops := map[string]chan struct{}{}
	var running sync.WaitGroup
	cleanup := func(id string) {
		write(id, report.Line{Type: report.TypeCleanup, Cleanup: &report.Cleanup{Cookie: "0x7466070000000000", HardTimeout: 10}})
	}
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		var c report.Command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			write("", report.Line{Type: report.TypeError, Error: &report.Error{Code: "usage", Message: err.Error()}})
			continue
		}
		if c.Hello {
			if f.firstLost {
				time.AfterFunc(f.helloAfter, func() { close(answered); serving() })
			}
			continue
		}
		select {
		case <-answered:
		default:
			f.mu.Lock()
			f.early++
			f.mu.Unlock()
		}
		trace := c.ID[:strings.LastIndex(c.ID[:strings.LastIndex(c.ID, "-")], "-")]
		f.mu.Lock()
		if c.Stop {
			f.commands["stop"]++
			if ch := stops[c.ID]; ch != nil {
				close(ch)
				delete(stops, c.ID)
			}
			f.mu.Unlock()
			continue
		}
		f.commands[c.Args[0]]++
		f.cond.Broadcast()
		inj := f.injected[trace]
		if inj == nil {
			inj = make(chan struct{})
			f.injected[trace] = inj
		}
		stop := make(chan struct{})
		stops[c.ID] = stop
		f.mu.Unlock()
		running.Add(1)
		go func() {
			defer running.Done()
			switch c.Args[0] {
			case "receive":
				write(c.ID, readyLine(report.RoleReceiver))
				select {
				case <-inj:
					write(c.ID, obsLine(received, 0, "Classifier", "priority=200,in_port=tun0"))
					write(c.ID, obsLine(delivered, 12, "Output", "priority=200,reg1=0x4"))
					write(c.ID, resultLine(node, report.RoleReceiver, 0, received, delivered))
				case <-stop:
				}
				<-stop
				cleanup(c.ID)
			case "trace":
				f.mu.Lock()
				for f.commands["receive"] < f.together {
					f.cond.Wait()
				}
				f.mu.Unlock()
				write(c.ID, readyLine(report.RoleSender))
				close(inj)
				write(c.ID, obsLine(spoof, 2, "SpoofGuard", "priority=200,ip"))
				write(c.ID, obsLine(fwdTunnel, 7, "L3Forwarding", "priority=200,ip,nw_dst=10.244.2.0/24"))
				write(c.ID, resultLine(node, report.RoleSender, 0, spoof, fwdTunnel))
				cleanup(c.ID)
			}
		}()
	}
	f.mu.Lock()
	f.stdinEnded = append(f.stdinEnded, pod)
	for id, ch := range stops {
		close(ch)
		delete(stops, id)
	}
	f.mu.Unlock()
	running.Wait()
	return nil
}

func poolHarness(f *serveCluster) (*harness, *Pool) {
	h := newHarness(nil)
	h.runner.Cluster = f
	pool := NewPool(PoolConfig{Cluster: f, Namespace: "kube-system", Image: "helper:test", Run: "tfcheck-abcde", Lifetime: time.Minute})
	return h, pool
}

func sharedPlan(name string) Plan {
	p := plan("n2")
	p.Trace, p.View.Name = name, name
	p.Record = &traceflow.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name}}
	return p
}

// TestPoolRunsTracesOnSharedHelpers: three inter-node traces at once run
// on one helper per node, each with its own verdict, and nothing is left:
// every receiver was stopped and said its flows are gone, and closing the
// pool ends the servers' input and deletes their pods.
func TestPoolRunsTracesOnSharedHelpers(t *testing.T) {
	f := newServeCluster()
	f.together = 3
	h, pool := poolHarness(f)
	c := cfg()
	c.Pool = pool
	var wg sync.WaitGroup
	outs := make([]Outcome, 3)
	errs := make([]error, 3)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = h.runner.Run(context.Background(), c, sharedPlan(fmt.Sprintf("tf-%d-xyz", i)))
		}()
	}
	wg.Wait()
	tags := map[uint8]bool{}
	for i := range outs {
		if errs[i] != nil || outs[i].Verdict != outcome.Delivered {
			t.Fatalf("trace %d: %s (%s), %v", i, outs[i].Verdict, outs[i].Reason, errs[i])
		}
		tags[outs[i].Tag] = true
	}
	if len(tags) != 3 {
		t.Errorf("traces shared tags: %v", tags)
	}
	f.mu.Lock()
	created, stops := len(f.created), f.commands["stop"]
	recv, send := f.commands["receive"], f.commands["trace"]
	f.mu.Unlock()
	if created != 2 || recv != 3 || send != 3 {
		t.Errorf("%d pods for %d receivers and %d senders, want 2 for 3 and 3", created, recv, send)
	}
	if stops < 3 {
		t.Errorf("%d stops, want one for each waiting receiver", stops)
	}
	h.mu.Lock()
	for _, u := range h.updates {
		if w, ok := u.(outcome.Warning); ok {
			t.Errorf("warning: %s", w.Message)
		}
	}
	h.mu.Unlock()
	if n := h.leases(t); n != 0 {
		t.Errorf("%d tag claims left", n)
	}
	if err := pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.stdinEnded) != 2 || len(f.deleted) != 1 || f.deleted[0] != "tfcheck-abcde" {
		t.Errorf("after Close: input ended on %v, pods deleted %v", f.stdinEnded, f.deleted)
	}
	for _, p := range f.created {
		if p.Labels[labels.Role] != string(helperpod.RoleServer) || p.Labels[labels.Trace] != "tfcheck-abcde" ||
			!p.Spec.Containers[0].Stdin || !p.Spec.Containers[0].StdinOnce || p.Spec.Containers[0].Args[0] != "serve" {
			t.Errorf("server pod %s: labels %v, args %v", p.Name, p.Labels, p.Spec.Containers[0].Args)
		}
	}
}

// TestPoolServerThatCannotStart: a node's server that cannot start fails
// the trace at once, naming the node and why.
func TestPoolServerThatCannotStart(t *testing.T) {
	f := newServeCluster()
	f.failPod = "FailedMount"
	h, pool := poolHarness(f)
	c := cfg()
	c.Pool = pool
	out, err := h.runner.Run(context.Background(), c, sharedPlan("tf-0-xyz"))
	if err == nil || out.Verdict != outcome.Failed || !strings.Contains(out.Reason, "helper on node n") || !strings.Contains(out.Reason, "shared helper") ||
		!strings.Contains(out.Reason, "/var/run/openvswitch") {
		t.Fatalf("verdict %s (%s), %v", out.Verdict, out.Reason, err)
	}
	if err := pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.deleted) != 1 {
		t.Errorf("pods deleted: %v", f.deleted)
	}
}

// TestPoolAttachRefused names the missing right, also where the server
// runs and its log says so.
func TestPoolAttachRefused(t *testing.T) {
	f := newServeCluster()
	f.attachErr = errors.New("pods \"x\" is forbidden")
	f.logText = `{"v":1,"type":"serving","time":"2026-12-07T13:00:00Z","serving":{"helperVersion":"v-test"}}` + "\n" +
		"traceflow-helper serve: node n, reading commands on standard input (at most 32 traces at once)\n"
	h, pool := poolHarness(f)
	c := cfg()
	c.Pool = pool
	out, err := h.runner.Run(context.Background(), c, sharedPlan("tf-0-xyz"))
	if err == nil || out.Verdict != outcome.Failed || !strings.Contains(out.Reason, "pods/attach") {
		t.Fatalf("verdict %s (%s), %v", out.Verdict, out.Reason, err)
	}
	_ = pool.Close(context.Background())
}

// TestPoolServerEndedBeforeAttachSaysWhy: a server whose container ended
// before the attach came (an image whose helper has no serve) is failed
// with what its log says, not with a missing right.
func TestPoolServerEndedBeforeAttachSaysWhy(t *testing.T) {
	f := newServeCluster()
	f.attachErr = errors.New("container helper is not running")
	f.logText = "traceflow-helper: unknown command \"serve\"\n" +
		`{"v":1,"type":"error","time":"2026-12-07T13:00:00Z","error":{"code":"usage","message":"run traceflow-helper help"}}` + "\n"
	h, pool := poolHarness(f)
	c := cfg()
	c.Pool = pool
	out, err := h.runner.Run(context.Background(), c, sharedPlan("tf-0-xyz"))
	if err == nil || out.Verdict != outcome.Failed || strings.Contains(out.Reason, "pods/attach") ||
		!strings.Contains(out.Reason, "ended before the plugin could attach") ||
		!strings.Contains(out.Reason, `unknown command "serve"`) || !strings.Contains(out.Reason, "run traceflow-helper help") {
		t.Fatalf("verdict %s (%s), %v", out.Verdict, out.Reason, err)
	}
	_ = pool.Close(context.Background())
}

// TestPoolWritesTracesOnceItHearsTheServer: an attach may connect the
// server's output after its first serving line; the traces' commands go
// only once the answer to the plugin's hello came back through it, so
// none of their lines can be written before the attach reads them.
func TestPoolWritesTracesOnceItHearsTheServer(t *testing.T) {
	f := newServeCluster()
	f.firstLost, f.helloAfter = true, 100*time.Millisecond
	h, pool := poolHarness(f)
	c := cfg()
	c.Pool = pool
	out, err := h.runner.Run(context.Background(), c, sharedPlan("tf-0-xyz"))
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("verdict %s (%s), %v", out.Verdict, out.Reason, err)
	}
	_ = pool.Close(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.early != 0 || f.commands["receive"] != 1 || f.commands["trace"] != 1 {
		t.Errorf("%d commands before the hello was answered (want 0); commands %v", f.early, f.commands)
	}
}
