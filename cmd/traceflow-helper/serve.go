package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/version"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/tracer"
)

// maxCommand bounds a command line: a trace's arguments fit in a few
// hundred bytes, and a longer line is refused without holding it whole.
const maxCommand = 64 * 1024

// server runs the traces that serve's commands start. Each runs in its own
// goroutine with a context of its own under ctx, and writes its lines
// through a writer that stamps its id.
type server struct {
	ctx  context.Context
	out  *report.Writer
	logf func(format string, a ...any)
	max  int
	// cache is what the traces read of the node and share.
	cache *tracer.NodeCache

	mu      sync.Mutex
	running map[string]context.CancelFunc
	wg      sync.WaitGroup
}

// serve runs the serve subcommand: a serving line, then one trace per
// command on stdin, until stdin ends or ctx is cancelled (SIGTERM); then
// it stops every trace and returns once each has written its last line.
func serve(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxTraces := fs.Uint("max-traces", 32, "the most traces running at once; a command starting one more is refused with an error line")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		_, _ = fmt.Fprintf(stderr, "traceflow-helper serve: %v\n", err)
		return 1
	}
	if fs.NArg() > 0 || *maxTraces < 1 || *maxTraces > 4096 {
		_, _ = fmt.Fprintf(stderr, "traceflow-helper serve: takes no arguments but --max-traces N, 1..4096 (commands come on standard input)\n")
		return 1
	}
	bout := &batched{out: stdout}
	defer bout.Close() //nolint:errcheck // nothing is left to tell
	out := report.NewWriter(bout, nil)
	// The log goes to standard output too, between the JSON lines: in the
	// container's log a line of standard error could land inside a long
	// JSON line the runtime split (report.Writer.Text).
	logf := func(format string, a ...any) { _ = out.Text(fmt.Sprintf(format, a...)) }
	node := nodeName()
	if err := out.Write(report.Line{Type: report.TypeServing, Serving: &report.Serving{Node: node, HelperVersion: version.Version}}); err != nil {
		logf("traceflow-helper serve: write the serving line: %v", err)
		return tracer.ExitSetup
	}
	logf("traceflow-helper serve: node %s, reading commands on standard input (at most %d traces at once)", node, *maxTraces)

	all, stopAll := context.WithCancel(ctx)
	defer stopAll()
	s := &server{ctx: all, out: out, logf: logf, max: int(*maxTraces), cache: &tracer.NodeCache{}, running: map[string]context.CancelFunc{}} //nolint:gosec // checked <= 4096
	inputs := make(chan input)
	go readCommands(all, stdin, inputs)
	var readErr error
loop:
	for {
		select {
		case <-ctx.Done():
			logf("traceflow-helper serve: %v: stopping every trace", context.Cause(ctx))
			break loop
		case in := <-inputs:
			if ctx.Err() != nil {
				// select picks at random when both are ready: no
				// command is acted on after a signal.
				logf("traceflow-helper serve: %v: stopping every trace", context.Cause(ctx))
				break loop
			}
			if in.err != nil {
				if !errors.Is(in.err, io.EOF) {
					readErr = in.err
				}
				logf("traceflow-helper serve: standard input ended (%v): stopping every trace", in.err)
				break loop
			}
			s.handle(in)
		}
	}
	stopAll()
	s.wg.Wait()
	s.cache.Close()
	if readErr != nil {
		msg := fmt.Sprintf("read commands from standard input: %v", readErr)
		_ = out.Write(report.Line{Type: report.TypeError, Error: &report.Error{Code: report.ErrorSetup, Message: msg}})
		logf("traceflow-helper serve: %s", msg)
		return tracer.ExitSetup
	}
	logf("traceflow-helper serve: every trace stopped")
	return 0
}

// input is one command line, a line too long to be one, or the error that
// ended standard input (io.EOF at its end).
type input struct {
	line    []byte
	tooLong bool
	err     error
}

// readCommands sends stdin's lines to to, and last the error that ended
// it. It gives up once ctx is done: serve reads no commands after that.
func readCommands(ctx context.Context, stdin io.Reader, to chan<- input) {
	send := func(in input) bool {
		select {
		case to <- in:
			return true
		case <-ctx.Done():
			return false
		}
	}
	br := bufio.NewReaderSize(stdin, maxCommand)
	for {
		b, err := br.ReadSlice('\n')
		in := input{line: append([]byte(nil), b...)}
		if errors.Is(err, bufio.ErrBufferFull) {
			// Skip the rest of the line, and say it was too long.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			in = input{tooLong: true}
		}
		if (len(in.line) > 0 || in.tooLong) && !send(in) {
			return
		}
		if err != nil {
			send(input{err: err})
			return
		}
	}
}

// handle acts on one command line.
func (s *server) handle(in input) {
	if in.tooLong {
		s.refuse("", "a command line longer than %d bytes: not a command", maxCommand)
		return
	}
	if len(bytes.TrimSpace(in.line)) == 0 {
		return
	}
	var c report.Command
	if err := json.Unmarshal(in.line, &c); err != nil {
		s.refuse("", "a command is one JSON object a line, {\"id\":\"ID\",\"args\":[...]} or {\"id\":\"ID\",\"stop\":true}: %v", err)
		return
	}
	switch {
	case c.Hello && len(c.Args) == 0 && !c.Stop:
		s.hello()
	case c.ID == "":
		s.refuse("", "a command needs an id")
	case c.Stop && len(c.Args) > 0:
		s.refuse(c.ID, "a command either starts a trace (args) or stops one (stop), not both")
	case c.Stop:
		s.stop(c.ID)
	case len(c.Args) == 0:
		s.refuse(c.ID, "a command needs args (a trace or receive invocation) or \"stop\":true")
	default:
		s.start(c.ID, c.Args)
	}
}

// hello answers a hello command with a serving line.
func (s *server) hello() {
	_ = s.out.Write(report.Line{Type: report.TypeServing, Serving: &report.Serving{Node: nodeName(), HelperVersion: version.Version}})
}

// refuse writes the usage error line for a command that starts nothing.
func (s *server) refuse(id, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	_ = s.out.ForTrace(id).Write(report.Line{Type: report.TypeError, Error: &report.Error{Code: report.ErrorUsage, Message: msg}})
	if id != "" {
		s.logf("%s: refused: %s", id, msg)
		return
	}
	s.logf("traceflow-helper serve: refused a command: %s", msg)
}

// start checks a trace's arguments and runs it, or refuses it with one
// usage error line.
func (s *server) start(id string, args []string) {
	if args[0] != "trace" && args[0] != "receive" {
		s.refuse(id, "unknown command %q: want trace or receive", args[0])
		return
	}
	// The error line says what is wrong; flag's usage text would only
	// bury it in the log.
	o, err := parseTrace(args, io.Discard)
	if errors.Is(err, errHelp) {
		s.refuse(id, "%s --help: run traceflow-helper %s --help for the flags", args[0], args[0])
		return
	}
	if err != nil {
		s.refuse(id, "%s: %v", args[0], err)
		return
	}
	if o.args.StartOnStdin {
		s.refuse(id, "--start-on-stdin (--inject-on-stdin) is for a one-shot helper: serve's standard input carries its commands, so start the trace when it should inject")
		return
	}
	o.cache = s.cache
	s.mu.Lock()
	if _, ok := s.running[id]; ok {
		s.mu.Unlock()
		s.refuse(id, "trace %q is running already: give each trace its own id", id)
		return
	}
	if len(s.running) >= s.max {
		s.mu.Unlock()
		s.refuse(id, "%d traces are running already (--max-traces %d): stop one, or wait for one to end", len(s.running), s.max)
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.running[id] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	logf := func(format string, a ...any) { s.logf(id+": "+format, a...) }
	logf("started %s", o.mode)
	go func() {
		defer s.wg.Done()
		defer cancel()
		code := runTrace(ctx, o, nil, s.out.ForTrace(id), logf)
		// Only once the trace's last line is out may its id start
		// another trace.
		s.mu.Lock()
		delete(s.running, id)
		s.mu.Unlock()
		logf("ended, exit code %d", code)
	}()
}

// stop cancels a running trace, as SIGTERM stops a one-shot helper. A
// trace that is not running may have ended already: nothing to do.
func (s *server) stop(id string) {
	s.mu.Lock()
	cancel, ok := s.running[id]
	s.mu.Unlock()
	if !ok {
		s.logf("%s: stop: not running (ended already?)", id)
		return
	}
	s.logf("%s: stopping", id)
	cancel()
}
