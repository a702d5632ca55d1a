// Package cli is the command line of kubectl traceflow: cobra commands whose
// Options structs turn flags into typed inputs (Complete), check them
// without a cluster (Validate) and only then talk to the cluster (Run).
package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tracerun"
)

// DisplayName is how help text names the command: kubectl runs the plugin,
// so users type `kubectl traceflow`, not the binary's name.
const DisplayName = "kubectl traceflow"

// Clients is everything a command needs from the cluster: the trace
// runner's.
type Clients = tracerun.Clients

// Connector makes Clients from the kubeconfig flags. Commands call it only
// after their input is validated, so that a usage error never waits for,
// or depends on, a kubeconfig or an API server.
type Connector func(*genericclioptions.ConfigFlags) (*Clients, error)

// Deps are what NewRootCommand takes from outside; zero values mean the
// real thing.
type Deps struct {
	Connect Connector
	// Suffix makes the random part of a Traceflow's name.
	Suffix func() string
	// IsTerminal reports whether output goes to a terminal.
	IsTerminal func(any) bool
	// Getenv reads the environment (NO_COLOR).
	Getenv func(string) string
	// Abandon, when set, is told how to remove a helper-mode trace's
	// objects should the process have to exit at once (a second Ctrl-C):
	// the arguments of a `cleanup` that does it, or nil once the trace has
	// cleaned up after itself.
	Abandon func(cleanupArgs []string)
}

func (d Deps) withDefaults() Deps {
	if d.Connect == nil {
		d.Connect = tracerun.Connect
	}
	if d.Suffix == nil {
		d.Suffix = func() string { return rand.String(5) }
	}
	if d.IsTerminal == nil {
		d.IsTerminal = isTerminal
	}
	if d.Getenv == nil {
		d.Getenv = os.Getenv
	}
	if d.Abandon == nil {
		d.Abandon = func([]string) {}
	}
	return d
}

// NewRootCommand returns `kubectl traceflow` with its subcommands.
func NewRootCommand(streams genericiooptions.IOStreams, deps Deps) *cobra.Command {
	deps = deps.withDefaults()
	configFlags := genericclioptions.NewConfigFlags(true)
	cmd := newTraceCommand(streams, deps, configFlags)
	cmd.SilenceErrors = true // main prints the error, once
	cmd.SilenceUsage = true
	// Completion for plugins goes through kubectl_complete-traceflow, not a
	// subcommand that would also shadow a pod called "completion".
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.SetFlagErrorFunc(flagError)
	configFlags.AddFlags(cmd.PersistentFlags())
	registerCompletions(cmd, deps, configFlags)
	cmd.SetUsageTemplate(usageTemplate(cmd.UsageTemplate()))
	cmd.AddCommand(newInstallCommand(streams, deps, configFlags), newUninstallCommand(streams, deps, configFlags),
		newInstallCRDCommand(streams, deps, configFlags), newVersionCommand(streams), newCleanupCommand(streams, deps, configFlags),
		newCheckCommand(streams, deps, configFlags), newMatrixCommand(streams, deps, configFlags))
	for _, c := range cmd.Commands() {
		c.SetFlagErrorFunc(flagError)
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	return cmd
}

// usageTemplate changes cobra's template so that help lists the trace's
// own flags apart from the two dozen kubeconfig flags of cli-runtime, which
// mean what they mean in kubectl.
func usageTemplate(base string) string {
	const flags = `{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}`
	const split = `{{if .LocalNonPersistentFlags.HasAvailableFlags}}

Flags:
{{.LocalNonPersistentFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}

Kubeconfig flags (as in kubectl):
{{if .HasParent}}{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{else}}{{.PersistentFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}`
	return strings.Replace(base, flags, split, 1)
}

// flagError makes a flag parsing error a usage error that points to help.
func flagError(c *cobra.Command, err error) error {
	return exitcode.UsageErrorf("%w; see '%s --help'", err, c.CommandPath())
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// colorEnabled decides --color: auto means a terminal and no NO_COLOR
// (https://no-color.org); always and never are explicit and win.
func colorEnabled(mode string, terminal bool, getenv func(string) string) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	return terminal && getenv("NO_COLOR") == ""
}

// exactArgs is cobra.ExactArgs with messages that say what to type.
func exactArgs(cmd *cobra.Command, args []string) error {
	example := fmt.Sprintf("e.g. '%s pod-a pod-b --tcp 80'", DisplayName)
	switch {
	case len(args) == 0:
		return exitcode.UsageErrorf("missing SRC and DST: name the source pod and the destination, %s", example)
	case len(args) == 1:
		return exitcode.UsageErrorf("missing DST after SRC %q: name the destination pod, Service or IP, %s", args[0], example)
	case len(args) > 2:
		return exitcode.UsageErrorf("too many arguments (%d: %q): give exactly SRC and DST, %s; see '%s --help'",
			len(args), args, example, cmd.CommandPath())
	}
	return nil
}

// noArgs is cobra.NoArgs with the usage exit code.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return exitcode.UsageErrorf("%s takes no arguments, got %q; see '%s --help' (to trace from a pod called %s, write pod/%s)",
			cmd.CommandPath(), args, cmd.CommandPath(), cmd.Name(), cmd.Name())
	}
	return nil
}

// kubeconfigArgs repeats the kubeconfig flags that were set, so that a
// background cleanup talks to the same cluster as the same user.
func kubeconfigArgs(cf *genericclioptions.ConfigFlags) []string {
	var out []string
	add := func(flag string, v *string) {
		if v != nil && *v != "" {
			out = append(out, "--"+flag+"="+*v)
		}
	}
	add("kubeconfig", cf.KubeConfig)
	add("context", cf.Context)
	add("cluster", cf.ClusterName)
	add("user", cf.AuthInfoName)
	add("server", cf.APIServer)
	add("as", cf.Impersonate)
	if cf.ImpersonateGroup != nil {
		for _, g := range *cf.ImpersonateGroup {
			out = append(out, "--as-group="+g)
		}
	}
	return out
}
