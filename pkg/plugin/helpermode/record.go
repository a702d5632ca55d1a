package helpermode

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// recorder keeps the trace record: always in memory (for -o json|yaml),
// and as a Traceflow object when the plan says so, its status written
// through the status subresource as the helpers report.
type recorder struct {
	client  traceflow.Client
	tf      *traceflow.Traceflow
	asCR    bool
	keep    bool
	created bool
	byNode  map[string]*report.NodeResult
	order   []string
}

func newRecorder(c traceflow.Client, tf *traceflow.Traceflow, asCR, keep bool) *recorder {
	if tf == nil {
		tf = &traceflow.Traceflow{}
	}
	return &recorder{client: c, tf: clone(tf), asCR: asCR && c != nil, keep: keep, byNode: map[string]*report.NodeResult{}}
}

func (r *recorder) start(ctx context.Context, tag uint8, now time.Time) error {
	t := metav1.NewTime(now)
	r.tf.Status = traceflow.Status{Phase: traceflow.PhaseRunning, DataplaneTag: int8(tag), StartTime: &t}
	if !r.asCR {
		return nil
	}
	status := r.tf.Status
	got, err := r.client.Create(ctx, r.tf)
	if err != nil {
		return err
	}
	r.created = true
	got.Status = status
	return r.push(ctx, got)
}

// push writes tf's status and keeps what the server returned, so the next
// update carries the current resourceVersion (we are the only writer).
func (r *recorder) push(ctx context.Context, tf *traceflow.Traceflow) error {
	if !r.asCR {
		r.tf = tf
		return nil
	}
	got, err := r.client.UpdateStatus(ctx, tf)
	if err != nil {
		return err
	}
	r.tf = got
	return nil
}

func (r *recorder) add(ctx context.Context, node string, role report.Role, o report.Observation, at time.Time) error {
	nr := r.byNode[node]
	if nr == nil {
		nr = &report.NodeResult{Node: node, Role: role, Timestamp: at.Unix()}
		r.byNode[node] = nr
		r.order = append(r.order, node)
	}
	nr.Observations = append(nr.Observations, o)
	tf := clone(r.tf)
	tf.Status.Results = r.results()
	return r.push(ctx, tf)
}

// results are the per-node results, sender first, in the order nodes
// first reported.
func (r *recorder) results() []report.NodeResult {
	out := make([]report.NodeResult, 0, len(r.order))
	for _, n := range r.order {
		if r.byNode[n].Role == report.RoleSender {
			out = append([]report.NodeResult{*r.byNode[n]}, out...)
		} else {
			out = append(out, *r.byNode[n])
		}
	}
	return out
}

func (r *recorder) finish(ctx context.Context, v view.Verdict, reason string) error {
	tf := clone(r.tf)
	tf.Status.Results = r.results()
	switch v {
	case view.Delivered, view.Dropped, view.Rejected, view.ForwardedOutOfNetwork:
		tf.Status.Phase = traceflow.PhaseSucceeded
	default:
		tf.Status.Phase = traceflow.PhaseFailed
		tf.Status.Reason = reason
	}
	if ctx.Err() != nil { // interrupted: still record the end, briefly
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupBudget)
		defer cancel()
	}
	return r.push(ctx, tf)
}

func (r *recorder) cleanup(ctx context.Context) error {
	if !r.created || r.keep {
		return nil
	}
	if err := r.client.Delete(ctx, r.tf.Name); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// clone deep-copies a record through JSON: there is no generated DeepCopy
// for our own types, and a record is copied a handful of times per trace.
func clone(tf *traceflow.Traceflow) *traceflow.Traceflow {
	b, err := json.Marshal(tf)
	if err != nil {
		panic(fmt.Sprintf("marshal Traceflow: %v", err)) // our own plain struct: cannot fail
	}
	out := &traceflow.Traceflow{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("unmarshal Traceflow: %v", err))
	}
	return out
}
