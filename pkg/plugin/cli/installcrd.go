package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// InstallCRDOptions is `kubectl traceflow install-crd`.
type InstallCRDOptions struct {
	genericiooptions.IOStreams
	configFlags *genericclioptions.ConfigFlags
	deps        Deps
	dryRun      bool

	crd *unstructured.Unstructured
}

func newInstallCRDCommand(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &InstallCRDOptions{IOStreams: streams, configFlags: cf, deps: deps}
	cmd := &cobra.Command{
		Use:   "install-crd",
		Short: "Install the Traceflow CRD (crd.antrea.io/v1beta1) on a cluster without Antrea",
		Long: `Install the Traceflow CustomResourceDefinition, so that traces can be recorded on
a cluster without Antrea. Where Antrea (or anyone else) installed it already,
it is left as it is. Needs permission to create CustomResourceDefinitions.

With --dry-run, print the manifest instead, e.g. to review it or to apply it
with 'kubectl apply -f -'.`,
		Example: `  kubectl traceflow install-crd
  kubectl traceflow install-crd --dry-run | kubectl apply -f -`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().Var(&dryRunValue{&o.dryRun}, "dry-run", "print the manifest and install nothing")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "true"
	return cmd
}

// Complete decodes the embedded manifest.
func (o *InstallCRDOptions) Complete() error {
	o.crd = &unstructured.Unstructured{}
	if err := yaml.Unmarshal(traceflow.CRDManifest(), &o.crd.Object); err != nil {
		return fmt.Errorf("decoding the embedded CRD manifest (a bug in this build): %w", err)
	}
	return nil
}

// Validate has nothing to check beyond what flag parsing did; it exists so
// every command has the same shape.
func (o *InstallCRDOptions) Validate() error { return nil }

// Run prints the manifest (--dry-run) or installs it.
func (o *InstallCRDOptions) Run(ctx context.Context) error {
	if o.dryRun {
		_, err := o.Out.Write(traceflow.CRDManifest())
		return err
	}
	clients, err := o.deps.Connect(o.configFlags)
	if err != nil {
		return err
	}
	return install.CRD(ctx, clients.Dynamic.Resource(traceflow.CRDsResource), o.crd, o.Out)
}
