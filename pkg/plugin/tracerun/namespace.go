package tracerun

import (
	"context"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/termsafe"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
)

// checkHelperNamespace fails early, before anything is created, when the
// helper namespace does not exist (the cluster was never set up with
// `kubectl traceflow install`: the first run after a krew install) or
// enforces a Pod Security level that rejects helper pods. A namespace that
// cannot be read for another reason is not an error here: pod creation
// will say what is wrong, and apiFailure explains it.
func checkHelperNamespace(ctx context.Context, get func(context.Context, string, metav1.GetOptions) (*corev1.Namespace, error), ns string) error {
	n, err := get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if ns == install.DefaultNamespace {
			return exitcode.Errorf(exitcode.Setup,
				"namespace %s does not exist: kubectl-traceflow is not set up on this cluster; run 'kubectl traceflow install' once (it needs cluster-admin; 'kubectl traceflow install --dry-run' shows what it creates), or pick an existing privileged namespace with --helper-namespace",
				ns)
		}
		return exitcode.Errorf(exitcode.Setup,
			"helper namespace %s does not exist: run 'kubectl traceflow install --helper-namespace %s' once (it needs cluster-admin), or leave --helper-namespace out to use %s",
			safe(ns), safe(ns), install.DefaultNamespace)
	}
	if err != nil {
		return nil
	}
	if level, ok := n.Labels[install.PodSecurityEnforce]; ok && level != "privileged" {
		return exitcode.Errorf(exitcode.Setup,
			"namespace %s enforces PodSecurity level %q, which rejects helper pods (they need hostNetwork and a hostPath of the OVS run directory): leave --helper-namespace out to use %s (made by 'kubectl traceflow install'), or label the namespace %s=privileged",
			safe(ns), safe(level), install.DefaultNamespace, install.PodSecurityEnforce)
	}
	return nil
}

// safe escapes a string from the cluster before it reaches a terminal.
func safe(s string) string { return termsafe.Escape(s, termsafe.Name) }
