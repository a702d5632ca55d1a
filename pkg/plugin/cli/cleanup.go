package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// CleanupOptions is `kubectl traceflow cleanup`.
type CleanupOptions struct {
	genericiooptions.IOStreams
	configFlags *genericclioptions.ConfigFlags
	deps        Deps

	namespace     string
	allNamespaces bool
	allRecords    bool
	force         bool
	dryRun        bool
	traces        []string
	againAfter    time.Duration
}

func newCleanupCommand(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &CleanupOptions{IOStreams: streams, configFlags: cf, deps: deps, namespace: install.DefaultNamespace}
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove helper pods, tag claims and unfinished records that a killed trace left behind",
		Long: `Remove what an interrupted kubectl traceflow left behind, found by the label
app.kubernetes.io/managed-by=kubectl-traceflow, and only what is stale, so that
other people's traces running now are spared:
  - tag claims (Leases) in the helper namespace whose time is up, judged by the
    API server's clock;
  - helper pods past their deadline, finished, or whose trace no longer holds a
    live claim;
  - Traceflow records still unfinished after their timeout plus a minute.
--force removes the rest too (it interrupts traces running now). Records kept
with --keep stay unless --all-records is given. --dry-run lists what would go.
The trace's OVS flows need no cleanup: they expire with the trace's timeout.`,
		Example: `  kubectl traceflow cleanup
  kubectl traceflow cleanup --dry-run
  kubectl traceflow cleanup --force --all-records`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.namespace, "helper-namespace", o.namespace, "namespace of the helper pods and tag claims")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "look for helper pods and tag claims in every namespace")
	f.BoolVar(&o.allRecords, "all-records", false, "also remove finished records kept with --keep")
	f.BoolVar(&o.force, "force", false, "also remove what belongs to traces that may still be running")
	f.BoolVar(&o.dryRun, "dry-run", false, "list what would be removed, remove nothing")
	f.StringArrayVar(&o.traces, "trace", nil, "only this trace's helper pods, tag claim and record (repeat for several)")
	_ = f.MarkHidden("trace") // used by an interrupted trace to clean up after itself in the background
	f.DurationVar(&o.againAfter, "again-after", 0, "sweep a second time after this long")
	// The background cleanup of a plugin interrupted twice: what the plugin
	// had asked the API server to create an instant before it exited may be
	// created after the first sweep listed; the second sweep removes it.
	_ = f.MarkHidden("again-after")
	return cmd
}

// Run sweeps and lists what it removed.
func (o *CleanupOptions) Run(ctx context.Context) error {
	c, err := o.deps.Connect(o.configFlags)
	if err != nil {
		return err
	}
	removed, err := install.Cleanup(ctx, c.Kube, c.Traceflows, install.CleanupOptions{
		Namespace: o.namespace, AllNamespaces: o.allNamespaces, AllRecords: o.allRecords,
		Force: o.force, DryRun: o.dryRun, Traces: o.traces, AgainAfter: o.againAfter})
	verb := "removed"
	if o.dryRun {
		verb = "would remove"
	}
	for _, group := range []struct {
		kind  string
		names []string
	}{{"pod", removed.Pods}, {"lease", removed.Leases}, {"traceflow", removed.Records}} {
		for _, n := range group.names {
			if _, werr := fmt.Fprintf(o.Out, "%s %s %s\n", verb, group.kind, view.Safe(n)); werr != nil {
				return werr
			}
		}
	}
	if removed.Live > 0 {
		if _, werr := fmt.Fprintf(o.Out, "left %d helper pods, tag claims or records of traces that may still be running (--force removes them too)\n", removed.Live); werr != nil {
			return werr
		}
	}
	if len(removed.Pods)+len(removed.Leases)+len(removed.Records)+removed.Live == 0 && err == nil {
		_, err = fmt.Fprintln(o.Out, "nothing to clean up")
		return err
	}
	return exitcode.Wrap(exitcode.Setup, err)
}
