// Package sweep removes what a killed plugin left behind: helper pods, tag
// claims and unfinished trace records, all found by the managed-by label.
// By default it removes only what is stale, so that `kubectl traceflow
// cleanup` never interrupts another user's trace that is running right now:
//   - a tag claim (Lease) whose time is up, by the API server's clock;
//   - a helper pod past its deadline, finished, or whose trace no longer
//     holds a live claim on the pod's tag;
//   - an unfinished record older than its timeout plus the start-up budget.
//
// Force removes everything regardless.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Selector selects everything kubectl traceflow creates.
const Selector = helperpod.ManagedByLabel + "=" + helperpod.ManagedByValue

// StartupBudget is how long a trace may take beyond its timeout to start
// its helpers and clean up (helpermode's budget): a record unfinished
// after its timeout plus this is stale.
const StartupBudget = 60 * time.Second

// Options say what to sweep.
type Options struct {
	// Namespace holds the helper pods and tag claims ("" for all namespaces).
	Namespace string
	// Records also removes finished records that --keep left.
	AllRecords bool
	// Force removes what is not stale too: traces running now are
	// interrupted.
	Force bool
	// DryRun lists without deleting.
	DryRun bool
	// Now is the API server's clock (tagalloc.ServerClock).
	Now time.Time
	// Traces, when set, limits the sweep to these traces' objects (a check
	// run's shared helpers count as a trace named after the run).
	Traces []string
}

// Removed lists what was (or, with DryRun, would be) removed, and what was
// left because it belongs to a trace that is still live.
type Removed struct {
	Pods, Leases, Records []string
	// Live counts what was left alone because it is not stale.
	Live int
}

// Records is the part of the trace record client the sweep uses.
type Records interface {
	List(ctx context.Context, selector string) ([]traceflow.Traceflow, error)
	Delete(ctx context.Context, name string) error
}

// Sweep removes helper pods, tag claim Leases and, where records is not nil,
// unfinished Traceflow records carrying the managed-by label, those that
// are stale unless o.Force. It goes on past errors and returns them all.
func Sweep(ctx context.Context, cs kubernetes.Interface, records Records, o Options) (Removed, error) {
	var out Removed
	var errs []error
	del := func() metav1.DeleteOptions {
		d := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}
		if o.DryRun {
			d.DryRun = []string{metav1.DryRunAll}
		}
		return d
	}
	selector := Selector
	only := map[string]bool{}
	for _, t := range o.Traces {
		only[t] = true
	}
	if len(o.Traces) > 0 {
		selector += "," + helperpod.TraceLabel + " in (" + strings.Join(o.Traces, ",") + ")"
	}

	// Claims first: whether a pod is stale depends on its trace's claim.
	leases, err := cs.CoordinationV1().Leases(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: Selector})
	live := map[string]bool{} // namespace/lease name -> the claim is live
	claimOf := map[string]*coordinationv1.Lease{}
	if err != nil {
		errs = append(errs, fmt.Errorf("list tag claims (leases): %w", err))
	} else {
		for i := range leases.Items {
			l := &leases.Items[i]
			key := l.Namespace + "/" + l.Name
			claimOf[key] = l
			if len(only) > 0 && !only[l.Labels[tagalloc.TraceLabel]] {
				continue
			}
			if !o.Force && !tagalloc.Expired(l, o.Now) {
				live[key] = true
				out.Live++
				continue
			}
			d := del()
			d.Preconditions = &metav1.Preconditions{UID: &l.UID} // not a claim made since we listed
			if err := cs.CoordinationV1().Leases(l.Namespace).Delete(ctx, l.Name, d); ignoreGone(err) != nil {
				errs = append(errs, fmt.Errorf("delete lease %s: %w", key, err))
				continue
			}
			out.Leases = append(out.Leases, key)
		}
	}

	pods, err := cs.CoreV1().Pods(o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		errs = append(errs, fmt.Errorf("list helper pods: %w", err))
	} else {
		for i := range pods.Items {
			p := &pods.Items[i]
			if !o.Force && !podStale(p, o.Now, claimOf, live) {
				out.Live++
				continue
			}
			if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, del()); ignoreGone(err) != nil {
				errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err))
				continue
			}
			out.Pods = append(out.Pods, p.Namespace+"/"+p.Name)
		}
	}

	if records != nil {
		// Records carry the managed-by label, not the trace label: their
		// name is the trace's.
		list, err := records.List(ctx, Selector)
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("list trace records: %w", err))
		}
		for _, tf := range list {
			if len(only) > 0 && !only[tf.Name] {
				continue
			}
			if finished(tf) {
				if !o.AllRecords {
					continue
				}
			} else if !o.Force && !recordStale(tf, o.Now) {
				out.Live++
				continue
			}
			if !o.DryRun {
				if err := records.Delete(ctx, tf.Name); ignoreGone(err) != nil {
					errs = append(errs, fmt.Errorf("delete traceflow %s: %w", tf.Name, err))
					continue
				}
			}
			out.Records = append(out.Records, tf.Name)
		}
	}
	return out, errors.Join(errs...)
}

// podStale: finished, past its activeDeadlineSeconds, or (but for a
// server) its trace holds no live claim on the pod's tag (the claim outlives the pods of a running
// trace: the plugin deletes pods before it releases the tag).
func podStale(p *corev1.Pod, now time.Time, claimOf map[string]*coordinationv1.Lease, live map[string]bool) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	if d := p.Spec.ActiveDeadlineSeconds; d != nil && now.After(p.CreationTimestamp.Add(time.Duration(*d)*time.Second)) {
		return true
	}
	if p.Labels[helperpod.RoleLabel] == string(helperpod.RoleServer) {
		// A check run's server holds no tag (its traces do): it is live
		// until its deadline, and ends by itself when its plugin goes.
		return false
	}
	tag, err := strconv.ParseUint(p.Annotations[helperpod.TagAnnotation], 10, 8)
	if err != nil {
		return true // not a pod this version made; it cannot be matched to a claim
	}
	key := p.Namespace + "/" + tagalloc.LeaseName(uint8(tag))
	l := claimOf[key]
	return l == nil || !live[key] || l.Labels[tagalloc.TraceLabel] != p.Labels[helperpod.TraceLabel]
}

// recordStale: created (by the server's clock) longer ago than the trace
// could possibly run.
func recordStale(tf traceflow.Traceflow, now time.Time) bool {
	limit := time.Duration(tf.Spec.Timeout)*time.Second + StartupBudget
	if tf.Spec.Timeout == 0 {
		limit = traceflow.DefaultTimeoutSeconds*time.Second + StartupBudget
	}
	return now.After(tf.CreationTimestamp.Add(limit))
}

func finished(tf traceflow.Traceflow) bool {
	return tf.Status.Phase == traceflow.PhaseSucceeded || tf.Status.Phase == traceflow.PhaseFailed
}

func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
