package helpermode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
)

// A Pool shares helpers among the traces of one `kubectl traceflow check`
// run: one pod per node runs `traceflow-helper serve`, started when the
// first trace needs its node, and every trace on that node, as sender or
// receiver, is a command written to its standard input (an attach, which
// needs create on pods/attach). Its output carries each line's trace id, by
// which the pool hands the lines to their trace. A trace still holds its
// own tag, mark, cookie and record; it only no longer pays for a pod.
// When the plugin goes, the attach ends, the server's standard input with
// it (StdinOnce), and the server stops its traces, deletes their flows and
// exits.
type Pool struct {
	cfg  PoolConfig
	life context.Context
	end  context.CancelFunc

	mu      sync.Mutex
	servers map[string]*server // by node
	watched bool
	closed  bool
}

// PoolConfig is how a pool's servers run.
type PoolConfig struct {
	Cluster    Cluster
	Namespace  string
	Image      string
	PullPolicy corev1.PullPolicy
	OVSRunDir  string
	OVNRunDir  string
	// Run names the check run: its servers are named and labelled after it
	// as a trace's helpers are after the trace (`kubectl traceflow cleanup
	// --trace RUN` removes them).
	Run string
	// Lifetime bounds how long a server may live (its pod's deadline is
	// derived from it), should its plugin never close it.
	Lifetime time.Duration
}

// NewPool returns a pool that starts no server until a trace needs one.
func NewPool(cfg PoolConfig) *Pool {
	life, end := context.WithCancel(context.Background())
	return &Pool{cfg: cfg, life: life, end: end, servers: map[string]*server{}}
}

// Start hands node's server a trace's helper: id is the helper's name
// (helperpod.Name), args its command line (helperpod.CommandArgs), and its
// report lines go to out as lineMsgs from pod id, until Forget. A server
// that cannot serve says so on out, as a problem.
func (p *Pool) Start(node, id string, args []string, antreaAgentPort int, out chan<- lineMsg) error {
	s, err := p.server(node, antreaAgentPort)
	if err != nil {
		return err
	}
	sub := &subscription{id: id, out: out, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go sub.pump()
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.subs[id]; old != nil {
		close(old.done)
	}
	s.subs[id] = sub
	if s.failed != "" {
		sub.push(lineMsg{pod: id, problem: s.failed})
		return nil
	}
	s.sendLocked(report.Command{ID: id, Args: args})
	return nil
}

// Serving reports whether node's server reads commands already.
func (p *Pool) Serving(node string) bool {
	serving := false
	p.withServer(node, func(s *server) { serving = s.started })
	return serving
}

// Stop asks node's server to stop the trace helper id: it deletes its
// flows and writes its cleanup line.
func (p *Pool) Stop(node, id string) {
	p.withServer(node, func(s *server) {
		if s.failed == "" {
			s.sendLocked(report.Command{ID: id, Stop: true})
		}
	})
}

// Forget stops delivering id's lines.
func (p *Pool) Forget(node, id string) {
	p.withServer(node, func(s *server) {
		if sub := s.subs[id]; sub != nil {
			close(sub.done)
			delete(s.subs, id)
		}
	})
}

// withServer runs f with node's server locked, if it has one.
func (p *Pool) withServer(node string, f func(s *server)) {
	p.mu.Lock()
	s := p.servers[node]
	p.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// Close ends every server: their standard input ends, so each stops what
// it still runs and exits; Close waits for that (within ctx, at most
// settleWait) and deletes their pods. It returns an error when the pods
// could not be deleted.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	servers := make([]*server, 0, len(p.servers))
	for _, s := range p.servers {
		servers = append(servers, s)
	}
	p.mu.Unlock()
	if len(servers) == 0 {
		p.end()
		return nil
	}
	for _, s := range servers {
		_ = s.stdinW.Close()
	}
	timer := time.NewTimer(settleWait)
	defer timer.Stop()
	for _, s := range servers {
		s.mu.Lock()
		waitFor := s.started && s.failed == ""
		s.mu.Unlock()
		if !waitFor {
			continue
		}
		select {
		case <-s.gone:
		case <-timer.C:
		case <-ctx.Done():
		}
	}
	p.end()
	err := whileAway(ctx, func(c context.Context) error { return p.cfg.Cluster.DeletePods(c, p.cfg.Namespace, p.cfg.Run) })
	if err != nil {
		return fmt.Errorf("delete the check's helper pods (run `kubectl traceflow cleanup`): %w", err)
	}
	return nil
}

// server returns node's server, creating its pod on first use.
// antreaAgentPort is the port of the Antrea agent's API on node (0: none),
// for which the pod mounts the agent's token directory; the first trace on
// a node decides it.
func (p *Pool) server(node string, antreaAgentPort int) (*server, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("the check's helpers are being removed")
	}
	if s := p.servers[node]; s != nil {
		return s, nil
	}
	if !p.watched {
		if err := p.watch(); err != nil {
			return nil, err
		}
		p.watched = true
	}
	s := &server{p: p, node: node, pod: helperpod.Name(p.cfg.Run, helperpod.RoleServer, node), antreaAgentPort: antreaAgentPort,
		subs: map[string]*subscription{}, writes: make(chan []byte, 256), gone: make(chan struct{})}
	s.stdinR, s.stdinW = io.Pipe()
	p.servers[node] = s
	go s.create()
	return s, nil
}

// watch follows the run's pods and the events about pods, for every
// server's state (image pulls, a node without OVS, its container started).
func (p *Pool) watch() error {
	pods, err := p.cfg.Cluster.WatchPods(p.life, p.cfg.Namespace, p.cfg.Run)
	if err != nil {
		return apiFailure(err, "watch", "pods", p.cfg.Namespace)
	}
	events, err := p.cfg.Cluster.WatchEvents(p.life, p.cfg.Namespace)
	if err != nil {
		pods.Stop()
		return apiFailure(err, "watch", "events", p.cfg.Namespace)
	}
	go func() {
		defer pods.Stop()
		defer events.Stop()
		for {
			select {
			case <-p.life.Done():
				return
			case e, ok := <-pods.ResultChan():
				if !ok {
					p.failAll("the API server closed the watch on the check's helper pods (restarted or unreachable?)")
					return
				}
				p.onPod(e)
			case e, ok := <-events.ResultChan():
				if !ok {
					events = watch.NewFake() // events are a nicety
					continue
				}
				if ev, ok := e.Object.(*corev1.Event); ok {
					p.onEvent(ev)
				}
			}
		}
	}()
	return nil
}

func (p *Pool) byPod(name string) *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.servers {
		if s.pod == name {
			return s
		}
	}
	return nil
}

func (p *Pool) failAll(why string) {
	p.mu.Lock()
	servers := make([]*server, 0, len(p.servers))
	for _, s := range p.servers {
		servers = append(servers, s)
	}
	p.mu.Unlock()
	for _, s := range servers {
		s.fail(why)
	}
}

func (p *Pool) onPod(e watch.Event) {
	n, ok := readPod(e, p.cfg.Image)
	if !ok {
		return
	}
	s := p.byPod(n.pod)
	if s == nil {
		return
	}
	if n.deleted {
		s.fail("its pod was deleted (by `kubectl traceflow cleanup` or an operator?)")
		return
	}
	if n.problem != "" && !s.serving() {
		s.fail(n.problem)
		return
	}
	if n.started {
		s.start()
	}
}

func (p *Pool) onEvent(ev *corev1.Event) {
	n := readKubelet(ev, p.cfg.OVSRunDir, p.cfg.Image)
	s := p.byPod(n.pod)
	if s == nil {
		return
	}
	if n.started {
		s.start()
		return
	}
	if n.problem != "" && !s.serving() {
		s.fail(n.problem)
	}
}
