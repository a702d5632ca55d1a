// Command traceflow-helper is the node helper: it traces a probe packet
// through this node's Open vSwitch and reports JSON lines on stdout.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/version"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/tracer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `traceflow-helper traces a tagged probe packet through this node's Open vSwitch
and prints what happened, hop by hop, as JSON lines on stdout (see pkg/nodehelper/report).

Usage:
  traceflow-helper trace   --ovs-rundir DIR --bridge BR (--source-pod NS/NAME | --in-port OVS_PORT)
                           --destination IP [--tcp PORT | --udp PORT | --icmp] [--tag N] [--timeout D]
  traceflow-helper receive --ovs-rundir DIR --bridge BR --tag N [--timeout D]
  traceflow-helper serve   [--max-traces N]
  traceflow-helper version

trace    injects the probe at the source port and reports this node's path.
receive  waits for the probe with tag N arriving from a tunnel and reports this
         node's path; it prints its "ready" line once its flows are installed,
         so the sender may inject right after.
serve    runs many traces and receives at once, each started and stopped by a
         JSON command on standard input, one a line:
           {"id":"ID","args":["receive","--tag","5",...]}   start a trace (or "trace")
           {"id":"ID","stop":true}                         stop it, as SIGTERM would
         and stamps each trace's report lines with "trace":"ID". End of input
         or SIGTERM stops every trace; serve exits once each has cleaned up.

Exit codes of trace and receive: 0 delivered, forwarded into a tunnel or out of the
network; 1 bad usage; 2 dropped or rejected; 3 not seen in time; 4 setup failure (OVS
unreachable, port not found). serve exits 0 (each trace's result line carries its own
code), 1 on bad usage, 4 if its standard input could not be read (after cleaning up).
Flows carry the trace's cookie and hard_timeout = --timeout, and are deleted on exit.

Run "traceflow-helper trace --help" or "traceflow-helper receive --help" for the flags.
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return 1
	}
	switch args[0] {
	case "-h", "--help", "help":
		_, _ = fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version":
		_, _ = fmt.Fprintf(stdout, "traceflow-helper %s (%s)\n", version.Version, version.Commit)
		return 0
	case "serve":
		return serve(ctx, args[1:], stdin, stdout, stderr)
	case "trace", "receive":
	default:
		_, _ = fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 1
	}
	o, err := parseTrace(args, stderr)
	if err != nil {
		if errors.Is(err, errHelp) {
			return 0
		}
		_, _ = fmt.Fprintf(stderr, "traceflow-helper %s: %v\n", args[0], err)
		return 1
	}
	logf := func(format string, a ...any) { _, _ = fmt.Fprintf(stderr, format+"\n", a...) }
	return runTrace(ctx, o, stdin, report.NewWriter(stdout, nil), logf)
}

// runTrace runs one parsed trace or receive to its end and returns its exit
// code: the one-shot subcommands run one, serve many at once. Every report
// line goes to out; logf says to humans what went wrong. Cancelling ctx
// stops the trace as SIGTERM stops a one-shot helper: the engine deletes
// its flows and writes its cleanup line before this returns.
func runTrace(ctx context.Context, o *options, stdin io.Reader, out *report.Writer, logf func(string, ...any)) int {
	common := o.common(out, logf)
	if o.args.StartOnStdin {
		in := watchInput(stdin)
		if err := in.waitForGo(ctx); err != nil {
			_ = out.Write(report.Line{Type: report.TypeError, Error: &report.Error{Code: report.ErrorSetup, Message: err.Error()}})
			logf("traceflow-helper trace: %v", err)
			return tracer.ExitSetup
		}
		// Runs after the last line is written, before the exit.
		defer in.waitForEnd(endWaitLimit)
	}
	ctx, cancel := context.WithTimeout(ctx, o.args.Timeout+10*time.Second)
	defer cancel()
	var res tracer.Outcome
	var err error
	if o.mode == "trace" {
		spec := o.spec
		spec.Common = common
		res, err = tracer.Trace(ctx, spec)
	} else {
		res, err = tracer.Receive(ctx, common)
	}
	if err != nil {
		code := res.ExitCode
		var se *tracer.SetupError
		if errors.As(err, &se) || code == 0 {
			code = tracer.ExitSetup
		}
		_ = out.Write(report.Line{Type: report.TypeError, Error: &report.Error{Code: report.ErrorSetup, Message: err.Error()}})
		logf("traceflow-helper %s: %v", o.mode, err)
		return code
	}
	return res.ExitCode
}

// goWaitLimit bounds how long a sender waits for the plugin's go: the
// receivers' start, image pulls included, fits well within it.
const goWaitLimit = 2 * time.Minute

// endWaitLimit bounds how long a helper waits, after its last line, for
// the plugin to end its input: an attach stream can lose what a container
// wrote just before it exited (seen in the lab under load: a result line
// cut off), so the helper exits only once the plugin says it has read the
// report, or after this, for a plugin that does not say.
const endWaitLimit = 5 * time.Second

// pluginInput is the plugin's side of an attach: a first line that says go,
// then the end of input once the plugin has read the report's last line.
type pluginInput struct {
	goLine chan error
	ended  chan struct{}
}

// watchInput reads stdin for the go and then for its end. A nil stdin
// has neither.
func watchInput(stdin io.Reader) *pluginInput {
	in := &pluginInput{goLine: make(chan error, 1), ended: make(chan struct{})}
	if stdin == nil {
		in.goLine <- errors.New("--start-on-stdin needs a standard input")
		close(in.ended)
		return in
	}
	go func() {
		defer close(in.ended)
		r := bufio.NewReader(stdin)
		_, err := r.ReadString('\n')
		in.goLine <- err
		if err == nil {
			_, _ = io.Copy(io.Discard, r)
		}
	}()
	return in
}

// waitForGo blocks until a line arrives on stdin. The plugin starts the
// sender's pod together with the receivers' and writes the line once every
// receiver is ready, so the sender's start overlaps theirs; the sender
// installs its flows and injects only then. A receiver gets its line the
// moment the plugin has attached: nothing it prints is then missed by the
// attach, which carries its report. End of input first means the plugin
// went away: the helper must not start.
func (in *pluginInput) waitForGo(ctx context.Context) error {
	select {
	case err := <-in.goLine:
		if err != nil {
			return fmt.Errorf("standard input ended before the plugin said go (%w): not starting", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopped while waiting for the plugin's go: %w", ctx.Err())
	case <-time.After(goWaitLimit):
		return fmt.Errorf("no go from the plugin within %s: not starting", goWaitLimit)
	}
}

// waitForEnd returns once the plugin has ended the input, or after limit.
func (in *pluginInput) waitForEnd(limit time.Duration) {
	select {
	case <-in.ended:
	case <-time.After(limit):
	}
}
