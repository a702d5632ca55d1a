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
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

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

// printError prints err once, as kubectl does. The message quotes the
// cluster (a helper's output, an Antrea failure reason, an object's name),
// so control characters are escaped before they reach the terminal: a
// crafted string must not move the cursor, retitle the window or hide text.
func printError(w io.Writer, err error) {
	if err != nil {
		// Nowhere is left to report a failed write to stderr.
		_, _ = fmt.Fprintf(w, "error: %s\n", escapeControls(err.Error()))
	}
}

// escapeControls writes control characters (C0 but newline and tab, DEL,
// C1), bidirectional overrides and invalid UTF-8 as Go escapes (\x1b,
// \u202e), leaving everything else, non-ASCII text included, as it is.
func escapeControls(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
