package install

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

func resource(dyn dynamic.Interface, o Object) dynamic.ResourceInterface {
	if ns := o.U.GetNamespace(); ns != "" {
		return dyn.Resource(o.GVR).Namespace(ns)
	}
	return dyn.Resource(o.GVR)
}

func ours(u *unstructured.Unstructured) bool {
	return u.GetLabels()[labels.ManagedBy] == labels.Manager
}

// Apply creates each object, or brings one that exists to what Objects
// says; it is idempotent. A CRD someone else installed (Antrea's) is left
// as it is, and so is a namespace's ownership: an existing namespace gets
// the Pod Security labels but is not marked as ours, so Remove never
// deletes a namespace it did not create (kube-system, chosen explicitly).
// It writes one kubectl-style line per object and stops at the first error.
func Apply(ctx context.Context, dyn dynamic.Interface, objs []Object, out io.Writer) error {
	for _, o := range objs {
		api := resource(dyn, o)
		existing, err := api.Get(ctx, o.U.GetName(), metav1.GetOptions{})
		verb := "created"
		switch {
		case apierrors.IsNotFound(err):
			if _, err := api.Create(ctx, o.U.DeepCopy(), metav1.CreateOptions{FieldManager: labels.Manager}); err != nil {
				return fmt.Errorf("create %s: %w", o.Ref(), err)
			}
		case err != nil:
			return fmt.Errorf("read %s: %w", o.Ref(), err)
		case o.OnlyIfAbsentOrOurs && !ours(existing):
			if _, err := fmt.Fprintf(out, "%s already exists and was not installed by kubectl-traceflow (Antrea's?); left unchanged\n", o.Ref()); err != nil {
				return err
			}
			continue
		default:
			want := merge(o, existing)
			if _, err := api.Update(ctx, want, metav1.UpdateOptions{FieldManager: labels.Manager}); err != nil {
				return fmt.Errorf("update %s: %w", o.Ref(), err)
			}
			verb = "configured"
		}
		if _, err := fmt.Fprintf(out, "%s %s\n", o.Ref(), verb); err != nil {
			return err
		}
	}
	return nil
}

// merge is the update of existing to o: the namespace keeps its labels and
// gains the Pod Security ones; everything else becomes o, on the existing
// resourceVersion.
func merge(o Object, existing *unstructured.Unstructured) *unstructured.Unstructured {
	if o.GVR == gvrNamespace {
		want := existing.DeepCopy()
		l := want.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range o.U.GetLabels() {
			if k == labels.ManagedBy && !ours(existing) {
				continue // not ours to remove later
			}
			l[k] = v
		}
		want.SetLabels(l)
		return want
	}
	want := o.U.DeepCopy()
	want.SetResourceVersion(existing.GetResourceVersion())
	return want
}

// Remove deletes what Apply made, in reverse order: only objects that carry
// the managed-by label, so a CRD or a namespace made by someone else stays.
// Removing the namespace removes the helper pods and tag claims in it;
// removing the CRD removes every record kept with --keep. With dryRun it
// only says what it would remove. It goes on past errors and returns them
// all.
func Remove(ctx context.Context, dyn dynamic.Interface, objs []Object, dryRun bool, out io.Writer) error {
	var errs []error
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		api := resource(dyn, o)
		existing, err := api.Get(ctx, o.U.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", o.Ref(), err))
			continue
		}
		if !ours(existing) {
			if _, err := fmt.Fprintf(out, "%s was not installed by kubectl-traceflow; left in place\n", o.Ref()); err != nil {
				return err
			}
			continue
		}
		verb := "deleted"
		if dryRun {
			verb = "would be deleted"
		} else if err := api.Delete(ctx, o.U.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s: %w", o.Ref(), err))
			continue
		}
		if _, err := fmt.Fprintf(out, "%s %s\n", o.Ref(), verb); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// ForRemoval is every object install may have made in namespace, the
// bindings included whatever groups they were made for.
func ForRemoval(namespace string) ([]Object, error) {
	return Objects(Params{Namespace: namespace, Groups: []string{"any"}})
}
