package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/sweep"
)

// CleanupOptions is `kubectl traceflow cleanup`.
type CleanupOptions struct {
	genericiooptions.IOStreams
	configFlags *genericclioptions.ConfigFlags
	deps        Deps

	namespace     string
	allNamespaces bool
	allRecords    bool
	dryRun        bool
}

func newCleanupCommand(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &CleanupOptions{IOStreams: streams, configFlags: cf, deps: deps, namespace: install.DefaultNamespace}
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove helper pods, tag claims and unfinished records that a killed trace left behind",
		Long: `Remove what an interrupted kubectl traceflow left behind, found by the label
app.kubernetes.io/managed-by=kubectl-traceflow: helper pods and tag claims
(Leases) in the helper namespace, and Traceflow records that never finished.
Records kept with --keep stay unless --all-records is given. Traces still
running are interrupted. The trace's OVS flows need no cleanup: they expire
with the trace's timeout.`,
		Example: `  kubectl traceflow cleanup
  kubectl traceflow cleanup --dry-run
  kubectl traceflow cleanup --helper-namespace traceflow --all-records`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.namespace, "helper-namespace", o.namespace, "namespace of the helper pods and tag claims")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "look for helper pods and tag claims in every namespace")
	f.BoolVar(&o.allRecords, "all-records", false, "also remove finished records kept with --keep")
	f.BoolVar(&o.dryRun, "dry-run", false, "list what would be removed, remove nothing")
	return cmd
}

// Run sweeps.
func (o *CleanupOptions) Run(ctx context.Context) error {
	c, err := o.deps.Connect(o.configFlags)
	if err != nil {
		return err
	}
	ns := o.namespace
	if o.allNamespaces {
		ns = ""
	}
	removed, err := sweep.Sweep(ctx, c.Kube, c.Traceflows, sweep.Options{Namespace: ns, AllRecords: o.allRecords, DryRun: o.dryRun})
	verb := "removed"
	if o.dryRun {
		verb = "would remove"
	}
	for _, group := range []struct {
		kind  string
		names []string
	}{{"pod", removed.Pods}, {"lease", removed.Leases}, {"traceflow", removed.Records}} {
		for _, n := range group.names {
			if _, werr := fmt.Fprintf(o.Out, "%s %s %s\n", verb, group.kind, safe(n)); werr != nil {
				return werr
			}
		}
	}
	if len(removed.Pods)+len(removed.Leases)+len(removed.Records) == 0 && err == nil {
		_, err = fmt.Fprintln(o.Out, "nothing to clean up")
		return err
	}
	if err != nil {
		return exitcode.Errorf(exitcode.Setup, "cleanup was incomplete: %w; check your RBAC (%s)", err,
			strings.Join([]string{"delete pods", "delete leases", "delete traceflows"}, ", "))
	}
	return nil
}
