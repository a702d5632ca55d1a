package engine

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// CRDs reads CustomResourceDefinitions (a dynamic client's resource
// interface for customresourcedefinitions fits).
type CRDs interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
}

// CheckRecordHome keeps a helper-mode decision to record the trace as a
// Traceflow object only where the served Traceflow CRD is ours (installed
// by `kubectl traceflow install-crd`, which labels it). Antrea's CRD has no
// `inferred` field on observations, and the API server prunes fields its
// schema does not declare: a record stored there would lose, silently,
// which hops were only predicted. Elsewhere, or where the CRD cannot be
// read, the record stays in the plugin (printed with -o yaml|json) and the
// decision's reason says why.
func CheckRecordHome(ctx context.Context, crds CRDs, d Decision) Decision {
	if d.Mode != Helper || !d.RecordAsCR {
		return d
	}
	why := ""
	crd, err := crds.Get(ctx, traceflow.CRDName, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		why = "cannot tell whose Traceflow CRD is served (get on customresourcedefinitions is not allowed)"
	case err != nil:
		why = "cannot read the Traceflow CRD (" + err.Error() + ")"
	case crd.GetLabels()[labels.ManagedBy] != labels.Manager:
		why = "the served Traceflow CRD is not kubectl-traceflow's and would drop the marks of inferred hops"
	default:
		return d
	}
	d.RecordAsCR = false
	d.Reason += "; the record stays in the plugin (see -o yaml): " + why
	return d
}
