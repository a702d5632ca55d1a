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
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

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
	s := &sweeper{cs: cs, o: o, only: map[string]bool{}, live: map[string]bool{}, claimOf: map[string]*coordinationv1.Lease{}}
	for _, t := range o.Traces {
		s.only[t] = true
	}
	// Claims first: whether a pod is stale depends on its trace's claim.
	s.leases(ctx)
	s.pods(ctx)
	if records != nil {
		s.records(ctx, records)
	}
	return s.out, errors.Join(s.errs...)
}

// sweeper is one Sweep: what it removed and failed at so far, and the
// claims it saw, which decide whether a pod is stale.
type sweeper struct {
	cs   kubernetes.Interface
	o    Options
	only map[string]bool // the traces to sweep; empty: all
	out  Removed
	errs []error
	// live holds namespace/lease name of each live claim; claimOf every
	// claim listed, by the same key.
	live    map[string]bool
	claimOf map[string]*coordinationv1.Lease
}

// skip says whether o.Traces leaves trace out of the sweep.
func (s *sweeper) skip(trace string) bool { return len(s.only) > 0 && !s.only[trace] }

func (s *sweeper) del() metav1.DeleteOptions {
	d := metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}
	if s.o.DryRun {
		d.DryRun = []string{metav1.DryRunAll}
	}
	return d
}

// leases removes the expired tag claims of the traces swept and notes
// every claim it lists, live or not, for pods to judge their pods by.
func (s *sweeper) leases(ctx context.Context) {
	leases, err := s.cs.CoordinationV1().Leases(s.o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Selector})
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("list tag claims (leases): %w", err))
		return
	}
	for i := range leases.Items {
		l := &leases.Items[i]
		key := l.Namespace + "/" + l.Name
		s.claimOf[key] = l
		if s.skip(l.Labels[labels.Trace]) {
			continue
		}
		if !s.o.Force && !tagalloc.Expired(l, s.o.Now) {
			s.live[key] = true
			s.out.Live++
			continue
		}
		d := s.del()
		d.Preconditions = &metav1.Preconditions{UID: &l.UID} // not a claim made since we listed
		if err := s.cs.CoordinationV1().Leases(l.Namespace).Delete(ctx, l.Name, d); ignoreGone(err) != nil {
			s.errs = append(s.errs, fmt.Errorf("delete lease %s: %w", key, err))
			continue
		}
		s.out.Leases = append(s.out.Leases, key)
	}
}

// pods removes stale helper pods; the API server selects o.Traces' pods
// by their trace label.
func (s *sweeper) pods(ctx context.Context) {
	selector := labels.Selector
	if len(s.o.Traces) > 0 {
		selector += "," + labels.Trace + " in (" + strings.Join(s.o.Traces, ",") + ")"
	}
	pods, err := s.cs.CoreV1().Pods(s.o.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		s.errs = append(s.errs, fmt.Errorf("list helper pods: %w", err))
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !s.o.Force && !podStale(p, s.o.Now, s.claimOf, s.live) {
			s.out.Live++
			continue
		}
		if err := s.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, s.del()); ignoreGone(err) != nil {
			s.errs = append(s.errs, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		s.out.Pods = append(s.out.Pods, p.Namespace+"/"+p.Name)
	}
}

// records removes stale trace records, and finished ones with
// o.AllRecords.
func (s *sweeper) records(ctx context.Context, records Records) {
	// Records carry the managed-by label, not the trace label: their
	// name is the trace's.
	list, err := records.List(ctx, labels.Selector)
	if err != nil && !apierrors.IsNotFound(err) {
		s.errs = append(s.errs, fmt.Errorf("list trace records: %w", err))
	}
	for _, tf := range list {
		if s.skip(tf.Name) {
			continue
		}
		if finished(tf) {
			if !s.o.AllRecords {
				continue
			}
		} else if !s.o.Force && !recordStale(tf, s.o.Now) {
			s.out.Live++
			continue
		}
		if !s.o.DryRun {
			if err := records.Delete(ctx, tf.Name); ignoreGone(err) != nil {
				s.errs = append(s.errs, fmt.Errorf("delete traceflow %s: %w", tf.Name, err))
				continue
			}
		}
		s.out.Records = append(s.out.Records, tf.Name)
	}
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
	if p.Labels[labels.Role] == string(helperpod.RoleServer) {
		// A check run's server holds no tag (its traces do): it is live
		// until its deadline, and ends by itself when its plugin goes.
		return false
	}
	tag, err := strconv.ParseUint(p.Annotations[labels.TagAnnotation], 10, 8)
	if err != nil {
		return true // not a pod this version made; it cannot be matched to a claim
	}
	key := p.Namespace + "/" + tagalloc.LeaseName(uint8(tag))
	l := claimOf[key]
	return l == nil || !live[key] || l.Labels[labels.Trace] != p.Labels[labels.Trace]
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

// ServerNow reads the API server's clock (a dry-run create of a Lease in
// namespace ns), by which a sweep judges what is stale: the plugin's own
// clock may be off.
func ServerNow(ctx context.Context, cs kubernetes.Interface, ns string) (time.Time, error) {
	return tagalloc.ServerClock(cs.CoordinationV1().Leases(ns), time.Now)(ctx)
}
