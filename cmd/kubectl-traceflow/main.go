// Command kubectl-traceflow is the kubectl plugin: `kubectl traceflow SRC DST`.
//
// It only wires the command to the process: the commands return errors, and
// this is the one place that prints them and turns them into an exit code.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/cli"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/termsafe"
)

func main() {
	os.Exit(run(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}

// run executes the command line args and returns the process exit code.
func run(args []string, streams genericiooptions.IOStreams) int {
	silenceKlog()
	// The first Ctrl-C cancels the context, so commands can clean up what
	// they made (within a few seconds); a second one exits at once, leaving
	// that cleanup to a background `kubectl traceflow cleanup`.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var ab abandon
	go func() {
		<-sigs
		cancel()
		<-sigs
		ab.exitNow(streams.ErrOut)
	}()
	cmd := cli.NewRootCommand(streams, cli.Deps{Abandon: ab.set})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	printError(streams.ErrOut, err)
	return int(exitcode.Of(err))
}

// silenceKlog drops klog's output. client-go reports through klog what it
// cannot return to its caller, on stderr by default: an attach's streams
// torn down as a trace ends ("Copying stdout failed ... use of closed
// network connection"). The plugin reports its own errors. A logger that
// discards takes every klog call, structured ones included; without it,
// errors still reach stderr past LogToStderr(false) (klog's
// stderrthreshold).
func silenceKlog() {
	klog.SetLogger(logr.Discard())
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
}

// abandon holds how to clean up the running trace should the process exit
// at once.
type abandon struct {
	mu   sync.Mutex
	args []string
}

func (a *abandon) set(args []string) {
	a.mu.Lock()
	a.args = args
	a.mu.Unlock()
}

// exitNow starts the trace's cleanup as a process of its own (in its own
// session, so the terminal's next Ctrl-C does not reach it; its requests
// time out after a few seconds) and exits with the code of an interrupted
// trace.
func (a *abandon) exitNow(stderr io.Writer) {
	a.mu.Lock()
	args := a.args
	a.mu.Unlock()
	msg := "interrupted again: exiting now"
	if args != nil {
		if self, err := os.Executable(); err == nil {
			c := exec.Command(self, args...) //nolint:gosec // this very binary, with arguments the trace built
			c.SysProcAttr = detached()
			if c.Start() == nil {
				msg += "; removing the trace's helper pods, tag claim and record in the background (if anything is left, run `kubectl traceflow cleanup`)"
			}
		}
	}
	_, _ = fmt.Fprintln(stderr, "error: "+msg)
	os.Exit(int(exitcode.Timeout))
}

// printError prints err once, as kubectl does. The message quotes the
// cluster (a helper's output, an Antrea failure reason, an object's name),
// so control characters are escaped before they reach the terminal: a
// crafted string must not move the cursor, retitle the window or hide text.
func printError(w io.Writer, err error) {
	if err != nil {
		// Nowhere is left to report a failed write to stderr.
		// Message style escapes in place and keeps newlines: a message
		// with a hint on its own line stays readable.
		_, _ = fmt.Fprintf(w, "error: %s\n", termsafe.Escape(err.Error(), termsafe.Message))
	}
}
