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
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/cli"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

func main() {
	os.Exit(run(os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}

// run executes the command line args and returns the process exit code.
func run(args []string, streams genericiooptions.IOStreams) int {
	// Ctrl-C cancels the context, so commands can clean up what they made.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := cli.NewRootCommand(streams, cli.Deps{})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	printError(streams.ErrOut, err)
	return int(exitcode.Of(err))
}

func printError(w io.Writer, err error) {
	if err != nil {
		// Nowhere is left to report a failed write to stderr.
		_, _ = fmt.Fprintf(w, "error: %v\n", err)
	}
}
