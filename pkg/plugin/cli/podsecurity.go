package cli

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// podSecurityEnforceLabel is the namespace label of Pod Security Admission.
const podSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"

// checkPodSecurity fails early, before anything is created, when the helper
// namespace enforces a Pod Security level that rejects helper pods. A
// namespace that cannot be read is not an error here: pod creation will say
// what is wrong, and apiFailure explains it.
func checkPodSecurity(ctx context.Context, get func(context.Context, string, metav1.GetOptions) (*corev1.Namespace, error), ns string) error {
	n, err := get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	if level, ok := n.Labels[podSecurityEnforceLabel]; ok && level != "privileged" {
		return exitcode.Errorf(exitcode.Setup,
			"namespace %s enforces PodSecurity level %q, which rejects helper pods (they need hostNetwork and a hostPath of the OVS run directory): run with --helper-namespace kube-system or another privileged namespace, or label the namespace %s=privileged",
			safe(ns), safe(level), podSecurityEnforceLabel)
	}
	return nil
}
