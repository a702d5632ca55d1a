// Package sweep removes what a killed plugin left behind: helper pods, tag
// claims and unfinished trace records, all found by the managed-by label.
package sweep

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Selector selects everything kubectl traceflow creates.
const Selector = helperpod.ManagedByLabel + "=" + helperpod.ManagedByValue

// Options say what to sweep.
type Options struct {
	// Namespace holds the helper pods and tag claims ("" for all namespaces).
	Namespace string
	// Records also removes finished records that --keep left.
	AllRecords bool
	// DryRun lists without deleting.
	DryRun bool
}

// Removed lists what was (or, with DryRun, would be) removed.
type Removed struct {
	Pods, Leases, Records []string
}

// Records is the part of the trace record client the sweep uses.
type Records interface {
	List(ctx context.Context, selector string) ([]traceflow.Traceflow, error)
	Delete(ctx context.Context, name string) error
}

// Sweep removes helper pods, tag claim Leases and, where records is not nil,
// unfinished Traceflow records carrying the managed-by label. It goes on
// past errors and returns them all.
func Sweep(ctx context.Context, cs kubernetes.Interface, records Records, o Options) (Removed, error) {
	var out Removed
	var errs []error
	del := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}
	if o.DryRun {
		del.DryRun = []string{metav1.DryRunAll}
	}

	pods, err := cs.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: Selector})
	if err != nil {
		errs = append(errs, fmt.Errorf("list helper pods: %w", err))
	} else {
		for _, p := range pods.Items {
			if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, del); ignoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err))
				continue
			}
			out.Pods = append(out.Pods, p.Namespace+"/"+p.Name)
		}
	}

	leases, err := cs.CoordinationV1().Leases(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: Selector})
	if err != nil {
		errs = append(errs, fmt.Errorf("list tag claims (leases): %w", err))
	} else {
		for _, l := range leases.Items {
			if err := cs.CoordinationV1().Leases(l.Namespace).Delete(ctx, l.Name, del); ignoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete lease %s/%s: %w", l.Namespace, l.Name, err))
				continue
			}
			out.Leases = append(out.Leases, l.Namespace+"/"+l.Name)
		}
	}

	if records != nil {
		list, err := records.List(ctx, Selector)
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("list trace records: %w", err))
		}
		for _, tf := range list {
			if finished(tf) && !o.AllRecords {
				continue
			}
			if !o.DryRun {
				if err := records.Delete(ctx, tf.Name); ignoreNotFound(err) != nil {
					errs = append(errs, fmt.Errorf("delete traceflow %s: %w", tf.Name, err))
					continue
				}
			}
			out.Records = append(out.Records, tf.Name)
		}
	}
	return out, errors.Join(errs...)
}

func finished(tf traceflow.Traceflow) bool {
	return tf.Status.Phase == traceflow.PhaseSucceeded || tf.Status.Phase == traceflow.PhaseFailed
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
