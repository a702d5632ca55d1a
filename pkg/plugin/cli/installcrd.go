package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// crdResource is where CustomResourceDefinitions live.
func crdResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
}

// crdAPI is the part of the dynamic client install-crd uses.
type crdAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
	Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, subresources ...string) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error)
}

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
	return o.install(ctx, clients.Dynamic.Resource(crdResource()))
}

// install creates the CRD, updates one we installed before, and leaves one
// that someone else (Antrea) installed alone: theirs matches their agents.
func (o *InstallCRDOptions) install(ctx context.Context, api crdAPI) error {
	name := traceflow.CRDName
	existing, err := api.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := api.Create(ctx, o.crd, metav1.CreateOptions{FieldManager: traceflow.ManagedBy}); err != nil {
			return crdError("creating", err)
		}
		_, err = fmt.Fprintf(o.Out, "customresourcedefinition.apiextensions.k8s.io/%s created\n", name)
		return err
	case err != nil:
		return crdError("reading", err)
	}
	if existing.GetLabels()[traceflow.LabelManagedBy] != traceflow.ManagedBy {
		_, err = fmt.Fprintf(o.Out, "customresourcedefinition.apiextensions.k8s.io/%s already exists and was not installed by kubectl-traceflow (Antrea's?); left unchanged\n", name)
		return err
	}
	o.crd.SetResourceVersion(existing.GetResourceVersion())
	if _, err := api.Update(ctx, o.crd, metav1.UpdateOptions{FieldManager: traceflow.ManagedBy}); err != nil {
		return crdError("updating", err)
	}
	_, err = fmt.Fprintf(o.Out, "customresourcedefinition.apiextensions.k8s.io/%s configured\n", name)
	return err
}

func crdError(doing string, err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return exitcode.Errorf(exitcode.Setup, "%s CustomResourceDefinition %s: %w; this needs cluster-admin rights: ask an administrator to run 'kubectl traceflow install-crd --dry-run | kubectl apply -f -'",
			doing, traceflow.CRDName, err)
	}
	return exitcode.Errorf(exitcode.Setup, "%s CustomResourceDefinition %s: %w; check that the cluster is reachable ('kubectl get crd') and --context/--kubeconfig are right",
		doing, traceflow.CRDName, err)
}
