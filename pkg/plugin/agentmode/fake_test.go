package agentmode

import (
	"context"
	"errors"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// step is one thing the fake API server does after the Traceflow is
// created: write a status (as Antrea's controller and agents do), end the
// current watch with an error event, close it, or refuse the next watches.
type step struct {
	status *traceflow.Status
	// await holds the write until the client has a watch open.
	await bool
	// endWatch ends the open watch with this error (nil: close it).
	endWatch  error
	closeOnly bool
	// refuse makes the next Watch calls fail with this error, n times.
	refuse  error
	refuseN int
}

// fakeServer is a traceflow.Client that behaves as an API server with a
// watch cache: every write gets a resourceVersion, a watch from a
// resourceVersion replays the writes after it and then follows, and a
// relist returns the current object and version.
type fakeServer struct {
	mu      sync.Mutex
	cond    *sync.Cond
	script  []step
	obj     *traceflow.Traceflow
	history []*traceflow.Traceflow
	watches []*fakeWatch
	refuse  error
	refuseN int
	// watchRVs are the resourceVersions the client watched from.
	watchRVs []string
	relists  int
	deleted  bool
}

func newFakeServer(script ...step) *fakeServer {
	f := &fakeServer{script: script}
	f.cond = sync.NewCond(&f.mu)
	return f
}

type fakeWatch struct {
	ch   chan watch.Event
	done chan struct{}
	once sync.Once
	// ended: the server ended the watch and closed ch (only play sends
	// after registration, so only play reads or sets it).
	ended bool
}

func (w *fakeWatch) Stop()                          { w.once.Do(func() { close(w.done) }) }
func (w *fakeWatch) ResultChan() <-chan watch.Event { return w.ch }

// send delivers e unless the client stopped the watch.
func (w *fakeWatch) send(e watch.Event) {
	select {
	case w.ch <- e:
	case <-w.done:
	}
}

func (w *fakeWatch) stopped() bool {
	if w.ended {
		return true
	}
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func event(typ watch.EventType, tf *traceflow.Traceflow) watch.Event {
	u, err := traceflow.ToUnstructured(tf)
	if err != nil {
		panic(err)
	}
	return watch.Event{Type: typ, Object: u}
}

func (f *fakeServer) Create(_ context.Context, tf *traceflow.Traceflow) (*traceflow.Traceflow, error) {
	f.mu.Lock()
	c := *tf
	c.ResourceVersion = "1"
	f.obj = &c
	f.history = append(f.history, &c)
	f.mu.Unlock()
	go f.play()
	out := c
	return &out, nil
}

func (f *fakeServer) play() {
	for _, s := range f.script {
		f.mu.Lock()
		switch {
		case s.status != nil:
			for s.await && f.openWatch() == nil {
				f.cond.Wait()
			}
			c := *f.obj
			c.Status = *s.status
			c.ResourceVersion = strconv.Itoa(len(f.history) + 1)
			f.obj = &c
			f.history = append(f.history, &c)
			for _, w := range f.watches {
				if !w.stopped() {
					w := w
					ev := event(watch.Modified, &c)
					f.mu.Unlock()
					w.send(ev)
					f.mu.Lock()
				}
			}
		case s.refuse != nil:
			f.refuse, f.refuseN = s.refuse, s.refuseN
		default:
			// End the watch the client has open, waiting for one if needed.
			w := f.openWatch()
			for w == nil {
				f.cond.Wait()
				w = f.openWatch()
			}
			f.mu.Unlock()
			if !s.closeOnly {
				w.send(watch.Event{Type: watch.Error, Object: toStatus(s.endWatch)})
			}
			f.mu.Lock()
			w.ended = true
			close(w.ch)
		}
		f.mu.Unlock()
	}
}

// openWatch is the watch the client has open, if any (f.mu held).
func (f *fakeServer) openWatch() *fakeWatch {
	for _, w := range f.watches {
		if !w.stopped() {
			return w
		}
	}
	return nil
}

func toStatus(err error) *metav1.Status {
	s := err.(apierrors.APIStatus).Status()
	return &s
}

func (f *fakeServer) Watch(_ context.Context, name, rv string) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchRVs = append(f.watchRVs, rv)
	if f.refuseN > 0 {
		f.refuseN--
		return nil, f.refuse
	}
	from, _ := strconv.Atoi(rv)
	w := &fakeWatch{ch: make(chan watch.Event, 64), done: make(chan struct{})}
	for _, h := range f.history {
		if n, _ := strconv.Atoi(h.ResourceVersion); n > from {
			w.ch <- event(watch.Modified, h)
		}
	}
	f.watches = append(f.watches, w)
	f.cond.Broadcast()
	return w, nil
}

func (f *fakeServer) Relist(context.Context, string) (*traceflow.Traceflow, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.relists++
	c := *f.obj
	return &c, c.ResourceVersion, nil
}

func (f *fakeServer) Delete(context.Context, string) error {
	f.mu.Lock()
	f.deleted = true
	f.mu.Unlock()
	return nil
}

func (f *fakeServer) Get(context.Context, string) (*traceflow.Traceflow, error) { return nil, nil }
func (f *fakeServer) UpdateStatus(context.Context, *traceflow.Traceflow) (*traceflow.Traceflow, error) {
	return nil, nil
}
func (f *fakeServer) List(context.Context, string) ([]traceflow.Traceflow, error) { return nil, nil }

// Errors the API server ends watches with.
var (
	errGone     = apierrors.NewResourceExpired("too old resource version: 1 (40)")
	errTooLarge = func() error {
		e := apierrors.NewTimeoutError("Too large resource version: 41, current: 40", 1)
		e.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
		return e
	}()
	errForbidden = apierrors.NewForbidden(schema.GroupResource{Group: "crd.antrea.io", Resource: "traceflows"}, "", errors.New("RBAC"))
)
