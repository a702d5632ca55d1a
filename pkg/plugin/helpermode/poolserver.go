package helpermode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
)

// A pool's server: one node's `traceflow-helper serve`, its pod, its
// attached standard input (the commands) and its log (the lines of every
// trace it runs, handed to each trace's subscription by trace id).

// server is one node's `traceflow-helper serve`.
type server struct {
	p    *Pool
	node string
	pod  string
	// antreaAgentPort is the node's Antrea agent API port, 0 for none.
	antreaAgentPort int

	mu sync.Mutex
	// started: its container runs, its input is attached to and its log
	// followed, and commands are written to it; failed says why it cannot
	// serve (any more).
	started bool
	failed  string
	subs    map[string]*subscription
	// pending are commands written once it serves, in order.
	pending [][]byte
	// stdin is the attach's input; closing it ends the server.
	stdinR *io.PipeReader
	stdinW *io.PipeWriter
	// writes carries commands to the one goroutine that writes stdin.
	writes chan []byte
	noise  []string
	// gone is closed when its log has ended (its process is gone, or the
	// stream broke).
	gone chan struct{}
}

// subscription delivers one trace's lines, in order, without ever
// blocking the server's log reader on a slow trace.
type subscription struct {
	id   string
	out  chan<- lineMsg
	mu   sync.Mutex
	q    []lineMsg
	wake chan struct{}
	done chan struct{}
}

func (s *subscription) push(m lineMsg) {
	s.mu.Lock()
	s.q = append(s.q, m)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) pump() {
	for {
		s.mu.Lock()
		q := s.q
		s.q = nil
		s.mu.Unlock()
		for _, m := range q {
			select {
			case s.out <- m:
			case <-s.done:
				return
			}
		}
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
	}
}

// create makes the server's pod.
func (s *server) create() {
	p := s.p
	pod, err := helperpod.Build(helperpod.Params{
		TraceName: p.cfg.Run, Namespace: p.cfg.Namespace, Node: s.node, Role: helperpod.RoleServer,
		Image: p.cfg.Image, PullPolicy: p.cfg.PullPolicy, OVSRunDir: p.cfg.OVSRunDir, OVNRunDir: p.cfg.OVNRunDir,
		Timeout: p.cfg.Lifetime, AntreaAgentPort: s.antreaAgentPort,
	})
	if err != nil {
		s.fail(err.Error())
		return
	}
	if err := p.cfg.Cluster.CreatePod(p.life, pod); err != nil {
		s.fail(apiFailure(err, "create", "pods", p.cfg.Namespace).Error())
	}
}

// serving reports whether its container was seen running: from then on,
// its own output says what goes wrong.
func (s *server) serving() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// start attaches to the server's standard input and follows its log, once
// its container runs.
func (s *server) start() {
	s.mu.Lock()
	if s.started || s.failed != "" {
		s.mu.Unlock()
		return
	}
	// Commands can go at once: what is written before the server reads
	// its input waits in it. Waiting for the serving line instead would
	// wait for the kubelet to serve the log (up to its 1 s relist).
	s.started = true
	for _, b := range s.pending {
		s.queueLocked(b)
	}
	s.pending = nil
	s.mu.Unlock()
	go s.attach()
	go s.write()
	go s.follow()
}

func (s *server) attach() {
	err := s.p.cfg.Cluster.Attach(s.p.life, s.p.cfg.Namespace, s.pod, s.stdinR, nil, nil)
	_ = s.stdinR.Close()
	if err != nil && s.p.life.Err() == nil {
		s.fail(fmt.Sprintf("cannot attach to it to hand it traces: %v (the plugin needs create on pods/attach in namespace %s)", err, s.p.cfg.Namespace))
	}
}

// write writes commands to standard input, in order: a write waits for the
// attach to read it.
func (s *server) write() {
	for {
		select {
		case b := <-s.writes:
			if _, err := s.stdinW.Write(b); err != nil {
				return
			}
		case <-s.p.life.Done():
			return
		}
	}
}

// sendLocked queues a command; s.mu is held.
func (s *server) sendLocked(c report.Command) {
	b, err := json.Marshal(c)
	if err != nil {
		return // cannot happen: strings only
	}
	b = append(b, '\n')
	if !s.started {
		s.pending = append(s.pending, b)
		return
	}
	s.queueLocked(b)
}

// queueLocked hands b to the writer without blocking the caller: the
// channel is wide, and a full one (a server that stopped reading) gets the
// command from a goroutine of its own, still in order behind the others
// only as far as the channel goes.
func (s *server) queueLocked(b []byte) {
	select {
	case s.writes <- b:
	default:
		go func() {
			select {
			case s.writes <- b:
			case <-s.p.life.Done():
			}
		}()
	}
}

func (s *server) follow() {
	defer close(s.gone)
	rc, err := openLog(s.p.life, s.p.cfg.Cluster, s.p.cfg.Namespace, s.pod)
	if err != nil {
		s.fail(fmt.Sprintf("read its log: %v", err))
		return
	}
	defer rc.Close() //nolint:errcheck // a read-only stream
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64*1024), 8*1024*1024)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		l, err := report.ParseLine(sc.Bytes())
		if err != nil {
			s.addNoise(sc.Text())
			continue
		}
		s.onLine(l)
	}
	why := "its output ended"
	if err := sc.Err(); err != nil {
		why = fmt.Sprintf("its log stream broke: %v", err)
	}
	s.mu.Lock()
	if len(s.noise) > 0 {
		why += ": " + strings.Join(s.noise, " | ")
	}
	s.mu.Unlock()
	s.fail(why)
}

func (s *server) addNoise(text string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noise = keepNoise(s.noise, text)
}

func (s *server) onLine(l report.Line) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Trace != "" {
		if sub := s.subs[l.Trace]; sub != nil {
			sub.push(lineMsg{pod: l.Trace, line: l})
		}
		return
	}
	if l.Type == report.TypeError && l.Error != nil {
		s.noise = keepNoise(s.noise, l.Error.Message)
	}
}

// fail marks the server unable to serve and tells every trace it runs.
func (s *server) fail(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != "" {
		return
	}
	s.failed = why
	s.pending = nil
	for id, sub := range s.subs {
		sub.push(lineMsg{pod: id, problem: why})
	}
}
