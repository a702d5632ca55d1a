package helpermode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// fakeCluster plays the kubelets and the helpers: a created pod goes
// Pending, then Running, and its log says what its node's script says.
type fakeCluster struct {
	fakeWatches
	mu      sync.Mutex
	logs    map[string]*io.PipeWriter
	readers map[string]*io.PipeReader
	created []*corev1.Pod
	deleted []string // trace names whose pods were deleted
	// stopped counts StopPods calls; onStop, when set, plays each
	// helper's SIGTERM instead of the default: a cleanup line, then the
	// end of its log.
	stopped int
	onStop  func(f *fakeCluster, pod string)
	// cleaned counts the cleanup lines the default SIGTERM wrote, and
	// cleanedAtDelete how many had been written when DeletePods came.
	cleaned, cleanedAtDelete int
	// script runs for each created pod, in its own goroutine: it may send
	// pod updates and events, and write report lines.
	script func(f *fakeCluster, p *corev1.Pod)
	// opened is closed for each pod name when its log stream is opened;
	// gone, when a line arrives on its stdin through Attach.
	opened map[string]chan struct{}
	gone   map[string]chan struct{}
	ended  map[string]bool
	// attachErr, when set, is what Attach returns at once.
	attachErr error
	// attached lists the pods whose report was read through Attach; goes
	// counts the go lines.
	attached map[string]bool
	goes     int
}

func newFakeCluster(script func(f *fakeCluster, p *corev1.Pod)) *fakeCluster {
	return &fakeCluster{
		fakeWatches: fakeWatches{pods: newChanWatch(), events: newChanWatch()},
		logs:        map[string]*io.PipeWriter{},
		readers:     map[string]*io.PipeReader{},
		opened:      map[string]chan struct{}{},
		gone:        map[string]chan struct{}{},
		ended:       map[string]bool{},
		script:      script,
	}
}

func (f *fakeCluster) CreatePod(_ context.Context, p *corev1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.created {
		if c.Name == p.Name {
			return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, p.Name)
		}
	}
	p = p.DeepCopy()
	f.created = append(f.created, p)
	r, w := io.Pipe()
	f.logs[p.Name], f.readers[p.Name] = w, r
	f.opened[p.Name] = make(chan struct{})
	f.gone[p.Name] = make(chan struct{})
	go f.script(f, p.DeepCopy())
	return nil
}

// StopPods plays the kubelets' SIGTERM: a helper whose log is followed
// writes its cleanup line and ends; any other pod goes away.
func (f *fakeCluster) StopPods(context.Context, string, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped++
	for _, p := range f.created {
		w, opened := f.logs[p.Name], f.opened[p.Name]
		if f.ended[p.Name] {
			continue // exited already
		}
		select {
		case <-opened:
		default:
			f.pods.ch <- watch.Event{Type: watch.Deleted, Object: p.DeepCopy()}
			continue
		}
		go func() {
			if f.onStop != nil {
				f.onStop(f, p.Name)
				return
			}
			b, _ := json.Marshal(report.Line{Version: report.SchemaVersion, Type: report.TypeCleanup, Cleanup: &report.Cleanup{Cookie: "0x7466070000000000", HardTimeout: 10}})
			f.mu.Lock()
			f.cleaned++ // counted before the line can reach the runner
			f.mu.Unlock()
			_, _ = w.Write(append(b, '\n'))
			_ = w.Close()
		}()
	}
	return nil
}

func (f *fakeCluster) DeletePods(_ context.Context, _, trace string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, trace)
	f.cleanedAtDelete = f.cleaned
	for _, w := range f.logs {
		_ = w.CloseWithError(io.EOF)
	}
	return nil
}

// fakeWatches are the watches a fake cluster hands out: what its kubelets
// send on pods and events.
type fakeWatches struct {
	pods   *chanWatch
	events *chanWatch
}

func (f fakeWatches) WatchPods(context.Context, string, string) (watch.Interface, error) {
	return f.pods, nil
}

func (f fakeWatches) WatchEvents(context.Context, string) (watch.Interface, error) {
	return f.events, nil
}

func (f *fakeCluster) Logs(_ context.Context, _, pod string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.readers[pod]
	if !ok {
		return nil, fmt.Errorf("no pod %s", pod)
	}
	close(f.opened[pod])
	return r, nil
}

// Attach plays an attach: a line on stdin is the helper's go; with
// stdout, the helper's report is read from here, not from its log.
func (f *fakeCluster) Attach(_ context.Context, _, pod string, stdin io.Reader, stdout, _ io.Writer) error {
	if f.attachErr != nil {
		return f.attachErr
	}
	copied := make(chan struct{})
	if stdout != nil {
		f.mu.Lock()
		r := f.readers[pod]
		if f.attached == nil {
			f.attached = map[string]bool{}
		}
		f.attached[pod] = true
		close(f.opened[pod])
		f.mu.Unlock()
		go func() {
			defer close(copied)
			_, _ = io.Copy(stdout, r)
		}()
	} else {
		close(copied)
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err == nil && line == "go\n" {
		f.mu.Lock()
		f.goes++
		close(f.gone[pod])
		f.mu.Unlock()
	}
	<-copied
	return nil
}

// waitGo blocks a fake sender started with --inject-on-stdin until the
// runner says go.
func (f *fakeCluster) waitGo(p *corev1.Pod) {
	if !p.Spec.Containers[0].Stdin {
		return
	}
	f.mu.Lock()
	ch := f.gone[p.Name]
	f.mu.Unlock()
	<-ch
}

func (f *fakeCluster) createdNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n []string
	for _, p := range f.created {
		n = append(n, p.Labels[labels.Role]+"@"+p.Spec.NodeName)
	}
	return n
}

// setState sends a pod update with the container in state s.
func (f *fakeCluster) setState(p *corev1.Pod, phase corev1.PodPhase, s corev1.ContainerState) {
	p = p.DeepCopy()
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: helperpod.ContainerName, State: s}}
	f.pods.ch <- watch.Event{Type: watch.Modified, Object: p}
}

func (f *fakeCluster) run(p *corev1.Pod) {
	f.setState(p, corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}})
	f.setState(p, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	f.mu.Lock()
	opened := f.opened[p.Name]
	f.mu.Unlock()
	<-opened
}

func (f *fakeCluster) event(p *corev1.Pod, reason, msg string) {
	f.events.ch <- watch.Event{Type: watch.Added, Object: &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: p.Name}, Reason: reason, Message: msg}}
}

// write prints report lines (or raw text, for a string) on p's log.
func (f *fakeCluster) write(p *corev1.Pod, lines ...any) {
	f.mu.Lock()
	w := f.logs[p.Name]
	f.mu.Unlock()
	for _, l := range lines {
		var b []byte
		switch l := l.(type) {
		case string:
			b = []byte(l)
		case report.Line:
			l.Version = report.SchemaVersion
			b, _ = json.Marshal(l)
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return
		}
	}
}

func (f *fakeCluster) end(p *corev1.Pod) {
	f.mu.Lock()
	f.ended[p.Name] = true
	w := f.logs[p.Name]
	f.mu.Unlock()
	_ = w.Close()
}

func readyLine(role report.Role) report.Line {
	return report.Line{Type: report.TypeReady, Ready: &report.Ready{HelperVersion: "v-test", Mode: role, Bridge: "br-int", Tag: 7}}
}

// obsLine is an observation of a hop the real probe reported from.
func obsLine(o report.Observation, table uint8, name, flow string) report.Line {
	return report.Line{Type: report.TypeObservation, Observation: &o, Hop: &report.Hop{Table: table, TableName: name, Flow: flow, Cookie: "0x7f00000000000007", Observed: true}}
}

// guessLine is an observation of a hop only OVS's trace accounts for.
func guessLine(o report.Observation, table uint8, name, flow string) report.Line {
	l := obsLine(o, table, name, flow)
	l.Hop.Observed = false
	return l
}

func resultLine(node string, role report.Role, code int, obs ...report.Observation) report.Line {
	return report.Line{Type: report.TypeResult, Result: &report.NodeResult{Node: node, Role: role, Observations: obs}, ExitCode: &code}
}

// fakeRecords is an in-memory traceflow.Client.
type fakeRecords struct {
	mu      sync.Mutex
	objects map[string]*traceflow.Traceflow
	updates int
	// observations counts the observations of each status write, in order.
	observations []int
	// meddle, when set, runs before each status write: another writer
	// (a user's label, a controller) changing the object meanwhile.
	meddle func(cur *traceflow.Traceflow)
	// failStatus fails every status write.
	failStatus error
	// stored is every state the object was stored in, in order.
	stored []*traceflow.Traceflow
	// onCreate, when set, runs as a create arrives (before it is stored).
	onCreate func()
}

// Create stores the object, and then, like an API server that carried out
// a request whose client gave up on it, fails if ctx ended meanwhile.
func (r *fakeRecords) Create(ctx context.Context, tf *traceflow.Traceflow) (*traceflow.Traceflow, error) {
	if r.onCreate != nil {
		r.onCreate()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := clone(tf)
	c.Status = traceflow.Status{} // the status subresource ignores status on create
	c.ResourceVersion = "1"
	r.objects[c.Name] = c
	r.stored = append(r.stored, clone(c))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return clone(c), nil
}

func (r *fakeRecords) Get(_ context.Context, name string) (*traceflow.Traceflow, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, ok := r.objects[name]; ok {
		return clone(o), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: traceflow.Group, Resource: traceflow.Resource}, name)
}

func (r *fakeRecords) UpdateStatus(_ context.Context, tf *traceflow.Traceflow) (*traceflow.Traceflow, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failStatus != nil {
		return nil, r.failStatus
	}
	cur, ok := r.objects[tf.Name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: traceflow.Group, Resource: traceflow.Resource}, tf.Name)
	}
	if r.meddle != nil {
		r.meddle(cur)
	}
	if cur.ResourceVersion != tf.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: traceflow.Group, Resource: traceflow.Resource}, tf.Name, fmt.Errorf("stale"))
	}
	c := clone(tf)
	r.updates++
	n := 0
	for _, res := range tf.Status.Results {
		n += len(res.Observations)
	}
	r.observations = append(r.observations, n)
	c.ResourceVersion = fmt.Sprint(r.updates + 1)
	r.objects[c.Name] = c
	r.stored = append(r.stored, clone(c))
	return clone(c), nil
}

func (r *fakeRecords) Delete(_ context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.objects, name)
	return nil
}

func (r *fakeRecords) List(context.Context, string) ([]traceflow.Traceflow, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []traceflow.Traceflow
	for _, o := range r.objects {
		out = append(out, *clone(o))
	}
	return out, nil
}

func (r *fakeRecords) Relist(context.Context, string) (*traceflow.Traceflow, string, error) {
	return nil, "", errors.New("helper mode never relists")
}
func (r *fakeRecords) Watch(context.Context, string, string) (watch.Interface, error) {
	return watch.NewEmptyWatch(), nil
}

// chanWatch is a watch whose channel is never closed, so that the scripts
// of fake helpers may still send after the runner stopped watching.
type chanWatch struct{ ch chan watch.Event }

func newChanWatch() *chanWatch                      { return &chanWatch{ch: make(chan watch.Event, 1000)} }
func (w *chanWatch) Stop()                          {}
func (w *chanWatch) ResultChan() <-chan watch.Event { return w.ch }
