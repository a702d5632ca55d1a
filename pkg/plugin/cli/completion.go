package cli

import (
	"context"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Shell completion goes through cobra's hidden __complete command, which
// kubectl runs via the kubectl_complete-traceflow script shipped in the
// release archives. Completion must never fail loudly: on any error it
// offers nothing and lets the shell fall back.

// completeEndpoints completes SRC (pods) and DST (pods and Services): as
// NAME and svc/NAME in the current namespace, and as NAMESPACE/... once the
// word names a namespace; namespaces themselves are offered as "NS/".
func completeEndpoints(deps Deps, cf *genericclioptions.ConfigFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) >= 2 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := deps.Connect(cf)
		if err != nil || c.Kube == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		withServices := len(args) == 1
		ns, prefix := c.Namespace, ""
		if i := strings.Index(toComplete, "/"); i > 0 {
			first := toComplete[:i]
			if first != "pod" && first != "svc" && first != "service" {
				ns, prefix = first, first+"/"
			}
		}
		var out []string
		if pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pods.Items {
				out = append(out, prefix+p.Name)
			}
		}
		if withServices {
			if svcs, err := c.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, s := range svcs.Items {
					out = append(out, prefix+"svc/"+s.Name)
				}
			}
		}
		if prefix == "" {
			if nss, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
				for _, n := range nss.Items {
					out = append(out, n.Name+"/")
				}
			}
		}
		sort.Strings(out)
		var matching []string
		for _, s := range out {
			if strings.HasPrefix(s, toComplete) {
				matching = append(matching, s)
			}
		}
		d := cobra.ShellCompDirectiveNoFileComp
		if len(matching) == 1 && strings.HasSuffix(matching[0], "/") {
			d |= cobra.ShellCompDirectiveNoSpace // a namespace: the name follows
		}
		return matching, d
	}
}

// completeNamespaces completes a namespace flag.
func completeNamespaces(deps Deps, cf *genericclioptions.ConfigFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		c, err := deps.Connect(cf)
		if err != nil || c.Kube == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		nss, err := c.Kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range nss.Items {
			if strings.HasPrefix(n.Name, toComplete) {
				out = append(out, n.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// registerCompletions wires completion into the trace command.
func registerCompletions(cmd *cobra.Command, deps Deps, cf *genericclioptions.ConfigFlags) {
	cmd.ValidArgsFunction = completeEndpoints(deps, cf)
	fixed := map[string][]string{
		"engine": {"auto", "agent", "helper"},
		"output": {outputPlain, outputWide, outputJSON, outputYAML},
		"expect": {"delivered", "dropped", "rejected", "any"},
		"color":  {"auto", "always", "never"},
	}
	for name, values := range fixed {
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	_ = cmd.RegisterFlagCompletionFunc("helper-namespace", completeNamespaces(deps, cf))
	_ = cmd.RegisterFlagCompletionFunc("namespace", completeNamespaces(deps, cf))
}
