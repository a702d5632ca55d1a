package helpermode

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// recorder keeps the trace record: always in memory (for the outcome),
// and, when the plan says so, as a Traceflow object whose status follows
// the helpers' reports. Writing the status once per hop would hold each
// hop up by an API round trip (30 hops, seconds on a busy API server), so
// a writer goroutine writes the latest results whenever they changed,
// coalescing hops that arrive meanwhile; the final status is written last.
//
// The object never holds a state Antrea acts on: its status never carries
// a dataplaneTag (the tag is in an annotation; Antrea's agents trace any
// Traceflow that is Running with a tag), and it is Running, without a tag,
// from the first status write on (Antrea's controller would give an object
// without a phase a tag of its own). Only the in-memory record carries the
// tag in its status.
//
// Its results say what the plugin's output says (outcome.NodeResult): on
// Antrea's pipeline a node's observations are Antrea's summary of its hops
// and tableHops holds every one, as in -o json|yaml.
type recorder struct {
	client  traceflow.Client
	asCR    bool
	keep    bool
	created bool

	mu     sync.Mutex // guards byNode and order
	byNode map[string][]outcome.TimedHop
	order  []string

	// tf is the last written record; only the writer (and start and
	// finish, outside its lifetime) touch it.
	tf     *traceflow.Traceflow
	dirty  chan struct{}
	stop   chan struct{}
	writer sync.WaitGroup
}

func newRecorder(c traceflow.Client, tf *traceflow.Traceflow, asCR, keep bool) *recorder {
	if tf == nil {
		tf = &traceflow.Traceflow{}
	}
	return &recorder{client: c, tf: clone(tf), asCR: asCR && c != nil, keep: keep,
		byNode: map[string][]outcome.TimedHop{}, dirty: make(chan struct{}, 1), stop: make(chan struct{})}
}

func (r *recorder) start(ctx context.Context, tag uint8, now time.Time) error {
	t := metav1.NewTime(now)
	r.tf.Status = traceflow.Status{Phase: traceflow.PhaseRunning, DataplaneTag: int8(dscp.Value(tag)), StartTime: &t}
	if !r.asCR {
		return nil
	}
	status := r.tf.Status
	obj := clone(r.tf)
	obj.Status = traceflow.Status{}
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[labels.TagAnnotation] = strconv.Itoa(int(tag))
	// The create is not cut short by an interrupt: a request cancelled on
	// its way may still be carried out by the API server, leaving a record
	// the trace does not know it made, and so never deletes. Once it is
	// known to exist, the cleanup deletes it.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBudget)
	got, err := r.client.Create(cctx, obj)
	cancel()
	if err != nil {
		return err
	}
	r.created = true
	if ctx.Err() != nil {
		return ctx.Err()
	}
	got.Status = status
	if err := r.push(ctx, got); err != nil {
		return err
	}
	r.writer.Add(1)
	go r.write(ctx)
	return nil
}

// write writes the results whenever they changed, until stop.
func (r *recorder) write(ctx context.Context) {
	defer r.writer.Done()
	for {
		select {
		case <-r.stop:
			return
		case <-ctx.Done():
			return
		case <-r.dirty:
			tf := clone(r.tf)
			tf.Status.Results = r.results(false)
			// A failed update is not fatal here: the final write carries
			// the whole status again, and its error is reported.
			_ = r.push(ctx, tf)
		}
	}
}

// conflictRetries bounds the rewrites of a status that someone else
// changed meanwhile.
const conflictRetries = 5

// push writes tf's status and keeps what the server returned, so the next
// update carries the current resourceVersion. We are not the only writer:
// a label or annotation added by a user, or a controller, changes the
// resourceVersion too; on a conflict the status is written again onto a
// fresh read of the object.
func (r *recorder) push(ctx context.Context, tf *traceflow.Traceflow) error {
	if !r.asCR {
		r.tf = tf
		return nil
	}
	// The tag stays in memory and in the annotation, never in the stored
	// status (see recorder).
	tag := tf.Status.DataplaneTag
	tf = clone(tf)
	tf.Status.DataplaneTag = 0
	for attempt := 1; ; attempt++ {
		got, err := r.client.UpdateStatus(ctx, tf)
		if err == nil {
			got.Status.DataplaneTag = tag
			r.tf = got
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			return err
		}
		fresh, gerr := r.client.Get(ctx, tf.Name)
		if gerr != nil {
			return fmt.Errorf("%w (and reading it again after the conflict: %w)", err, gerr)
		}
		fresh.Status = tf.Status
		tf = fresh
	}
}

// add records a hop; the writer picks it up.
func (r *recorder) add(h outcome.Hop, at time.Time) {
	r.mu.Lock()
	// A node's part of the answer's way back is a result of its own.
	key := h.Node
	if h.Role == report.RoleReply {
		key += "\x00reply"
	}
	if _, ok := r.byNode[key]; !ok {
		r.order = append(r.order, key)
	}
	r.byNode[key] = append(r.byNode[key], outcome.TimedHop{Hop: h, At: at})
	r.mu.Unlock()
	select {
	case r.dirty <- struct{}{}:
	default: // a write is already due; it will carry this one too
	}
}

// results are the per-node results, sender first, in the order nodes
// first reported. Until final, a node's observations are only what can no
// longer change (outcome.AntreaSettled: a rule hop waits for the node's
// path to end, which may take it back), so that a reader watching the
// object never sees a hop that a later write withdraws.
func (r *recorder) results(final bool) []report.NodeResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]report.NodeResult, 0, len(r.order))
	var replies []report.NodeResult
	for _, key := range r.order {
		hops := r.byNode[key]
		shown := outcome.AntreaSettled(hops)
		switch {
		case hops[0].Role == report.RoleReply:
			shown = hops // as Model.NodeSummary: an answer's every hop
		case final:
			shown = outcome.AntreaSummary(hops)
		}
		// A node's role is that of its first hop (its helper's).
		nr := outcome.NodeResult(hops[0].Node, hops[0].Role, hops, shown)
		switch nr.Role {
		case report.RoleSender:
			out = append([]report.NodeResult{nr}, out...)
		case report.RoleReply:
			replies = append(replies, nr)
		default:
			out = append(out, nr)
		}
	}
	return append(out, replies...)
}

// finish stops the writer and writes the final phase and results.
func (r *recorder) finish(ctx context.Context, v outcome.Verdict, reason string, reply *outcome.ReplyEnd) error {
	close(r.stop)
	r.writer.Wait()
	tf := clone(r.tf)
	if reply != nil {
		if tf.Annotations == nil {
			tf.Annotations = map[string]string{}
		}
		tf.Annotations[labels.ReplyAnnotation] = string(reply.Fate)
	}
	tf.Status.Results = r.results(true)
	tf.Status.Phase = traceflow.PhaseSucceeded
	if !v.Completed() {
		tf.Status.Phase, tf.Status.Reason = traceflow.PhaseFailed, reason
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
