package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
)

// InstallOptions is `kubectl traceflow install` and `uninstall`.
type InstallOptions struct {
	genericiooptions.IOStreams
	configFlags *genericclioptions.ConfigFlags
	deps        Deps
	remove      bool

	dryRun    bool
	namespace string
	groups    []string

	objs []install.Object
}

func newInstallCommand(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &InstallOptions{IOStreams: streams, configFlags: cf, deps: deps, namespace: install.DefaultNamespace}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Set up a cluster for helper-mode traces (once, as cluster-admin)",
		Long: `Install what helper-mode traces need, once per cluster, as cluster-admin:

  - the Traceflow CRD (crd.antrea.io/v1beta1), unless Antrea installed it;
  - the namespace ` + install.DefaultNamespace + `, with Pod Security level privileged
    (helper pods use hostNetwork and a hostPath), for that namespace only;
  - ClusterRole ` + install.ClusterRoleName + `: what every user of the plugin reads
    cluster-wide (pods, services, namespaces, endpointslices, networkpolicies)
    and the trace records (traceflows);
  - Role ` + install.RoleName + ` in that namespace: helper pods, their logs and
    attach, events, and the tag claims (Leases).

With --group, both roles are bound to the groups named; without it nobody is
bound and the command says how to bind. Nothing here grants anything in
kube-system. Running it again brings everything back to this version's
shape. --dry-run prints the manifest instead, for review or
'kubectl apply -f -'. 'kubectl traceflow uninstall' removes it again.`,
		Example: `  kubectl traceflow install --group traceflow-users
  kubectl traceflow install --dry-run | kubectl apply -f -
  kubectl traceflow uninstall`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd, true)
	return cmd
}

func newUninstallCommand(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &InstallOptions{IOStreams: streams, configFlags: cf, deps: deps, namespace: install.DefaultNamespace, remove: true}
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what 'kubectl traceflow install' set up",
		Long: `Remove what 'kubectl traceflow install' made: the role bindings, the roles, the
namespace (with any helper pods and tag claims in it) and the Traceflow CRD,
which takes every kept trace record with it. Only objects labelled
app.kubernetes.io/managed-by=kubectl-traceflow are removed: Antrea's CRD, or a
namespace that existed before install, stay. --dry-run lists what would go.`,
		Example: `  kubectl traceflow uninstall --dry-run
  kubectl traceflow uninstall`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd, false)
	return cmd
}

func (o *InstallOptions) addFlags(cmd *cobra.Command, withGroups bool) {
	f := cmd.Flags()
	f.Var(&dryRunValue{&o.dryRun}, "dry-run", "print what would be done and change nothing")
	f.Lookup("dry-run").NoOptDefVal = "true"
	f.StringVar(&o.namespace, "helper-namespace", o.namespace, "namespace for the helper pods and tag claims")
	if withGroups {
		f.StringArrayVar(&o.groups, "group", nil, "bind both roles to this group (repeatable); none: bind nobody")
	}
}

// Complete builds the objects.
func (o *InstallOptions) Complete() error {
	if o.namespace == "" {
		return exitcode.UsageErrorf("--helper-namespace is empty: leave it out to use %s", install.DefaultNamespace)
	}
	var err error
	if o.remove {
		o.objs, err = install.ForRemoval(o.namespace)
	} else {
		o.objs, err = install.Objects(install.Params{Namespace: o.namespace, Groups: o.groups})
	}
	return err
}

// Run prints, applies or removes.
func (o *InstallOptions) Run(ctx context.Context) error {
	if o.dryRun && !o.remove {
		b, err := install.Manifest(o.objs)
		if err != nil {
			return err
		}
		_, err = o.Out.Write(b)
		return err
	}
	clients, err := o.deps.Connect(o.configFlags)
	if err != nil {
		return err
	}
	if o.remove {
		if err := install.Remove(ctx, clients.Dynamic, o.objs, o.dryRun, o.Out); err != nil {
			return install.Explain("uninstall", err)
		}
		return nil
	}
	if err := install.Apply(ctx, clients.Dynamic, o.objs, o.Out); err != nil {
		return install.Explain("install", err)
	}
	if len(o.groups) == 0 {
		_, err = fmt.Fprintf(o.Out, "No one is bound to the roles yet: rerun with --group GROUP, or bind users yourself, e.g.\n"+
			"  kubectl create clusterrolebinding %s-USER --clusterrole=%s --user=USER\n"+
			"  kubectl create rolebinding %s-USER -n %s --role=%s --user=USER\n",
			install.BindingName, install.ClusterRoleName, install.BindingName, o.namespace, install.RoleName)
	}
	return err
}
