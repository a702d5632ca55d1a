package install

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/apierr"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// CRDAPI is the part of the dynamic client that CRD uses: where
// CustomResourceDefinitions live (traceflow.CRDsResource).
type CRDAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
	Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, subresources ...string) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error)
}

// CRD installs crd (the Traceflow CRD, traceflow.CRDManifest decoded),
// as `kubectl traceflow install-crd` does: it creates it, updates one we
// installed before, and leaves one that someone else (Antrea) installed
// alone: theirs matches their agents. It writes one kubectl-style line.
func CRD(ctx context.Context, api CRDAPI, crd *unstructured.Unstructured, out io.Writer) error {
	name := traceflow.CRDName
	existing, err := api.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := api.Create(ctx, crd, metav1.CreateOptions{FieldManager: labels.Manager}); err != nil {
			return crdError("creating", err)
		}
		_, err = fmt.Fprintf(out, "customresourcedefinition.apiextensions.k8s.io/%s created\n", name)
		return err
	case err != nil:
		return crdError("reading", err)
	}
	if existing.GetLabels()[labels.ManagedBy] != labels.Manager {
		_, err = fmt.Fprintf(out, "customresourcedefinition.apiextensions.k8s.io/%s already exists and was not installed by kubectl-traceflow (Antrea's?); left unchanged\n", name)
		return err
	}
	crd.SetResourceVersion(existing.GetResourceVersion())
	if _, err := api.Update(ctx, crd, metav1.UpdateOptions{FieldManager: labels.Manager}); err != nil {
		return crdError("updating", err)
	}
	_, err = fmt.Fprintf(out, "customresourcedefinition.apiextensions.k8s.io/%s configured\n", name)
	return err
}

// Explain says what failed when `kubectl traceflow install` or `uninstall`
// (what) failed with err, and what to do about it.
func Explain(what string, err error) error {
	denied := apierr.Say{Before: what + ": ",
		After: "; this needs cluster-admin rights once: ask an administrator to run 'kubectl traceflow " + what + "', or to apply 'kubectl traceflow install --dry-run'"}
	return apierr.Wrap(err, apierr.Messages{
		Forbidden:    denied,
		Unauthorized: denied,
		Other:        apierr.Say{Before: what + ": ", After: "; check that the cluster is reachable and --context/--kubeconfig are right"},
	})
}

func crdError(doing string, err error) error {
	what := doing + " CustomResourceDefinition " + traceflow.CRDName + ": "
	denied := apierr.Say{Before: what,
		After: "; this needs cluster-admin rights: ask an administrator to run 'kubectl traceflow install-crd --dry-run | kubectl apply -f -'"}
	return apierr.Wrap(err, apierr.Messages{
		Forbidden:    denied,
		Unauthorized: denied,
		Other:        apierr.Say{Before: what, After: "; check that the cluster is reachable ('kubectl get crd') and --context/--kubeconfig are right"},
	})
}
