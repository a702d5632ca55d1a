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
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/engine"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
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
  traceflow-helper version

trace    injects the probe at the source port and reports this node's path.
receive  waits for the probe with tag N arriving from a tunnel and reports this
         node's path; it prints its "ready" line once its flows are installed,
         so the sender may inject right after.

Exit codes: 0 delivered, forwarded into a tunnel or out of the network; 1 bad usage;
2 dropped or rejected; 3 not seen in time; 4 setup failure (OVS unreachable, port not found).
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
	case "trace", "receive":
	default:
		_, _ = fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
		return 1
	}
	o := newOptions(args[0], stderr)
	if err := o.parse(args[1:]); err != nil {
		if errors.Is(err, errHelp) {
			return 0
		}
		_, _ = fmt.Fprintf(stderr, "traceflow-helper %s: %v\n", args[0], err)
		return 1
	}
	out := report.NewWriter(stdout, nil)
	logf := func(format string, a ...any) { _, _ = fmt.Fprintf(stderr, format+"\n", a...) }
	common := o.common(out, logf)
	if o.mode == "trace" && o.injectOnStdin {
		if err := waitForGo(ctx, stdin); err != nil {
			_ = out.Write(report.Line{Type: report.TypeError, Error: &report.Error{Code: report.ErrorSetup, Message: err.Error()}})
			_, _ = fmt.Fprintf(stderr, "traceflow-helper trace: %v\n", err)
			return engine.ExitSetup
		}
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout+10*time.Second)
	defer cancel()
	var res engine.Outcome
	var err error
	if o.mode == "trace" {
		spec, serr := o.traceSpec(common)
		if serr != nil {
			_, _ = fmt.Fprintf(stderr, "traceflow-helper trace: %v\n", serr)
			return 1
		}
		res, err = engine.Trace(ctx, spec)
	} else {
		res, err = engine.Receive(ctx, common)
	}
	if err != nil {
		code := res.ExitCode
		var se *engine.SetupError
		if errors.As(err, &se) || code == 0 {
			code = engine.ExitSetup
		}
		_ = out.Write(report.Line{Type: report.TypeError, Error: &report.Error{Code: report.ErrorSetup, Message: err.Error()}})
		_, _ = fmt.Fprintf(stderr, "traceflow-helper %s: %v\n", o.mode, err)
		return code
	}
	return res.ExitCode
}

// goWaitLimit bounds how long a sender waits for the plugin's go: the
// receivers' start, image pulls included, fits well within it.
const goWaitLimit = 2 * time.Minute

// waitForGo blocks until a line arrives on stdin. The plugin starts the
// sender's pod together with the receivers' and writes the line once every
// receiver is ready, so the sender's start overlaps theirs; the sender
// installs its flows and injects only then. End of input first means the
// plugin went away: the sender must not inject.
func waitForGo(ctx context.Context, stdin io.Reader) error {
	if stdin == nil {
		return errors.New("--inject-on-stdin needs a standard input")
	}
	got := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(stdin).ReadString('\n')
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			return fmt.Errorf("standard input ended before the plugin said go (%w): not injecting", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopped while waiting for the plugin's go: %w", ctx.Err())
	case <-time.After(goWaitLimit):
		return fmt.Errorf("no go from the plugin within %s: not injecting", goWaitLimit)
	}
}
