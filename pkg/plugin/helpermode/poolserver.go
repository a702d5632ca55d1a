package helpermode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
)

// A pool's server: one node's `traceflow-helper serve`, its pod, and an
// attach to it: its standard input (the commands) and output (the lines of
// every trace it runs, handed to each trace's subscription by trace id).

// server is one node's `traceflow-helper serve`.
type server struct {
	p    *Pool
	node string
	pod  string
	// antreaAgentPort is the node's Antrea agent API port, 0 for none.
	antreaAgentPort int

	mu sync.Mutex
	// started: its container runs and it is attached to; heard: a
	// serving line came through that attach, so its output reaches the
	// plugin, and commands are written to it; failed says why it cannot
	// serve (any more).
	started bool
	heard   bool
	failed  string
	subs    map[string]*subscription
	// pending are commands written once it is heard, in order.
	pending [][]byte
	// stdin is the attach's input; closing it ends the server.
	stdinR *io.PipeReader
	stdinW *io.PipeWriter
	// writes carries commands to the one goroutine that writes stdin.
	writes chan []byte
	noise  []string
	// gone is closed when its output has ended (its process is gone, or
	// the attach broke).
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

// start attaches to the server, once its container runs: commands go to
// its standard input, and its output (every trace's lines and its own log,
// report/FORMAT.md) comes back on the attach's standard output.
//
// Not its log: the kubelet serves a container's log only once its
// pod-lifecycle relist has seen the container, up to a second after it
// started (measured in the lab: a node's first lines 0.6 s late, which a
// suite's first traces waited for), and follows it by reading the file
// the runtime writes; an attach finds the container in the runtime
// directly. An attach carries what the container writes from the moment
// the runtime has connected it, and the runtime may hand the attach's
// input on a moment before: the first command is a hello, and the traces'
// commands go once its answer (a serving line) came back, so none of a
// trace's lines is written before the attach reads them.
func (s *server) start() {
	s.mu.Lock()
	if s.started || s.failed != "" {
		s.mu.Unlock()
		return
	}
	s.started = true
	s.queueLocked(mustCommand(report.Command{Hello: true}))
	s.mu.Unlock()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	go s.attach(outW, errW)
	go s.write()
	go s.read(outR)
	go s.readErrors(errR)
}

func (s *server) attach(out, errOut *io.PipeWriter) {
	err := s.p.cfg.Cluster.Attach(s.p.life, s.p.cfg.Namespace, s.pod, s.stdinR, out, errOut)
	_ = s.stdinR.Close()
	if err != nil && s.p.life.Err() == nil {
		// A container that ended before the attach came (a helper image
		// without serve, say) said why in its log, as its output would
		// have: quote it; else the attach itself was refused.
		if s.quoteLog() {
			s.fail(s.withNoise(fmt.Sprintf("it ended before the plugin could attach to it (%v)", err)))
		} else {
			s.fail(fmt.Sprintf("cannot attach to it to hand it traces: %v (the plugin needs create on pods/attach in namespace %s)", err, s.p.cfg.Namespace))
		}
	}
	_ = out.Close()
	_ = errOut.Close()
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
	b := mustCommand(c)
	if !s.heard {
		s.pending = append(s.pending, b)
		return
	}
	s.queueLocked(b)
}

// heardLocked notes that the server's output reaches the plugin and
// writes the commands that waited for that; s.mu is held.
func (s *server) heardLocked() {
	if s.heard {
		return
	}
	s.heard = true
	for _, b := range s.pending {
		s.queueLocked(b)
	}
	s.pending = nil
}

// mustCommand is c as a line of serve's input.
func mustCommand(c report.Command) []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // cannot happen: strings and booleans only
	}
	return append(b, '\n')
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

// read hands the server's output, line by line, to the traces it names;
// other lines are kept to quote should it fail.
func (s *server) read(r io.Reader) {
	defer close(s.gone)
	sc := bufio.NewScanner(r)
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
	// Drain what is left, so that the attach never blocks on it.
	_, _ = io.Copy(io.Discard, r)
	why := "its output ended"
	if err := sc.Err(); err != nil {
		why = fmt.Sprintf("its output broke: %v", err)
	}
	s.fail(s.withNoise(why))
}

// withNoise is why, followed by the lines of the server's own that it
// wrote beside its report lines, if any.
func (s *server) withNoise(why string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.noise) > 0 {
		why += ": " + strings.Join(s.noise, " | ")
	}
	return why
}

// readErrors keeps the server's standard error (a Go panic's, a runtime's
// words) to quote should it fail.
func (s *server) readErrors(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s.addNoise(sc.Text())
	}
	_, _ = io.Copy(io.Discard, r)
}

// quoteLog keeps the lines of a server's log that are not report lines
// (and the messages of its error lines), for a server whose output could
// not be read through an attach, and reports whether it ended without
// serving: lines to quote and no serving line (a serving helper writes
// one first, and a line of its own after it: its attach was refused, not
// its start). The log of an ended container ends; a running one's is read
// for at most quoteLogFor.
func (s *server) quoteLog() bool {
	ctx, cancel := context.WithTimeout(s.p.life, quoteLogFor)
	defer cancel()
	rc, err := openLog(ctx, s.p.cfg.Cluster, s.p.cfg.Namespace, s.pod)
	if err != nil {
		return false
	}
	// A running container's log never ends: its bound closes it.
	stop := context.AfterFunc(ctx, func() { _ = rc.Close() })
	defer stop()
	defer rc.Close() //nolint:errcheck // a read-only stream
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64*1024), 8*1024*1024)
	served := false
	for sc.Scan() {
		if l, err := report.ParseLine(sc.Bytes()); err == nil {
			served = served || l.Type == report.TypeServing
			if l.Type == report.TypeError && l.Error != nil {
				s.addNoise(l.Error.Message)
			}
			continue
		}
		s.addNoise(sc.Text())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !served && len(s.noise) > 0
}

// quoteLogFor bounds the read of a server's log after a failed attach.
const quoteLogFor = 2 * time.Second

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
	if l.Type == report.TypeServing {
		s.heardLocked()
		return
	}
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
