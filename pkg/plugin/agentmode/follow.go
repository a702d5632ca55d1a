package agentmode

// Following the record: one watch from the creation on, resumed after a
// list where it ends, until Antrea's controller writes the final phase.

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// ending is how following the record ended.
type ending struct {
	verdict outcome.Verdict
	reason  string
	err     error
}

type follower struct {
	r    *Runner
	name string
	// nodes are the nodes whose results were seen, in order of appearance.
	nodes   map[string]*nodeSeen
	order   []string
	running bool
	tag     int8
	dst     outcome.DestinationKind
	// decided is the hop that decided the verdict, once Antrea finished.
	decided *outcome.Hop
	resumed int
}

// nodeSeen is what was shown of one node's result.
type nodeSeen struct {
	role report.Role
	hops []outcome.TimedHop
}

// follow watches the record from obj, the object as created, to its end.
//
// The watch starts at obj's resourceVersion, the revision of the
// Traceflow's own creation: the API server's watch cache reaches it with
// the creation event itself, so the watch needs no progress notification
// from etcd (a watch without a resourceVersion waits for one, and where
// etcd sends none the API server ends it after 3 s with "Too large
// resource version"). Every status write after the creation comes as an
// event. Where a watch ends anyway (410 Gone, too large a resourceVersion,
// a closed connection), the record is listed again from the watch cache
// (resourceVersion 0, which needs no progress notification either) and
// watched from the list's resourceVersion: whatever was written before
// that version is in the list, whatever after it comes as an event, so no
// update is lost.
func (f *follower) follow(ctx context.Context, obj *traceflow.Traceflow) ending {
	if end, done := f.apply(ctx, obj); done {
		return end
	}
	rv := obj.ResourceVersion
	for {
		w, err := f.r.Records.Watch(ctx, f.name, rv)
		if err != nil {
			if ctx.Err() != nil {
				return f.expired(ctx)
			}
			if !resumable(err) {
				return ending{outcome.Failed, "watch failed", apiFailure(err, "watch")}
			}
		} else {
			var end ending
			var done bool
			end, done, err = f.consume(ctx, w)
			w.Stop()
			if done {
				return end
			}
		}
		// The watch ended early: resume from a fresh list. Resumes come
		// further apart each time (from 50 ms, at most 1 s), so that an API
		// server refusing every watch at once is not asked again in a loop.
		f.resumed++
		select {
		case <-ctx.Done():
			return f.expired(ctx)
		case <-time.After(min(50*time.Millisecond<<min(f.resumed-1, 5), time.Second)):
		}
		tf, listRV, lerr := f.r.Records.Relist(ctx, f.name)
		if lerr != nil {
			if ctx.Err() != nil {
				return f.expired(ctx)
			}
			return ending{outcome.Failed, "relist failed", exitcode.Errorf(exitcode.Setup, "the watch on Traceflow %s ended (%v) and listing it again failed: %w", f.name, err, lerr)}
		}
		if tf != nil {
			if end, done := f.apply(ctx, tf); done {
				return end
			}
		}
		rv = listRV
	}
}

// consume reads w until the trace ends (done) or the watch does: then it
// says why the watch ended.
func (f *follower) consume(ctx context.Context, w watch.Interface) (end ending, done bool, why error) {
	for {
		select {
		case <-ctx.Done():
			return f.expired(ctx), true, nil
		case e, ok := <-w.ResultChan():
			if !ok {
				return ending{}, false, errors.New("the API server closed the watch")
			}
			switch e.Type {
			case watch.Error:
				err := apierrors.FromObject(e.Object)
				if !resumable(err) {
					return ending{outcome.Failed, "watch error", exitcode.Errorf(exitcode.Setup, "watching the Traceflow: %v", err)}, true, nil
				}
				return ending{}, false, err
			case watch.Bookmark:
				continue
			}
			tf, err := traceflow.FromObject(e.Object)
			if err != nil {
				continue
			}
			if e.Type == watch.Deleted {
				return ending{outcome.Failed, "deleted", exitcode.Errorf(exitcode.Setup, "Traceflow %s was deleted before it finished", tf.Name)}, true, nil
			}
			if end, done := f.apply(ctx, tf); done {
				return end, true, nil
			}
		}
	}
}

// resumable reports whether a watch that failed with err can go on from a
// fresh list: its resourceVersion expired (410 Gone), or was too large for
// the watch cache, which waited for etcd to say it had caught up and gave
// up (504, "Too large resource version": etcd without progress
// notifications), or the API server timed the watch out.
func resumable(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)
}

// expired is the ending when the context ran out.
func (f *follower) expired(ctx context.Context) ending {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if !f.running {
			// Antrea leaves a trace without a phase while all its
			// dataplane tags are taken, retrying in the background.
			msg := "Antrea never started the trace: all its dataplane tags may be held by running traces, or antrea-controller is not processing Traceflows"
			return ending{outcome.Failed, msg, exitcode.Errorf(exitcode.Setup, "%s; retry later, check the antrea-controller logs, or use --engine helper", msg)}
		}
		return ending{outcome.Incomplete, "Antrea did not finish the trace within its timeout", nil}
	}
	return ending{outcome.Incomplete, "interrupted", exitcode.Errorf(exitcode.Timeout, "trace interrupted before Antrea finished it")}
}

// apply shows what tf adds and says whether the trace ended.
func (f *follower) apply(ctx context.Context, tf *traceflow.Traceflow) (ending, bool) {
	if tf.Status.DataplaneTag > 0 && f.tag == 0 {
		// Antrea removes the tag when the trace succeeds: keep the first.
		f.tag = tf.Status.DataplaneTag
		f.r.Emit(outcome.Tagged{At: outcome.At{Time: f.r.Now()}, Tag: uint8(tf.Status.DataplaneTag)})
	}
	final := tf.Status.Phase == traceflow.PhaseSucceeded || tf.Status.Phase == traceflow.PhaseFailed
	f.emitNew(ctx, tf, final)
	switch tf.Status.Phase {
	case traceflow.PhaseRunning:
		f.running = true
	case traceflow.PhaseSucceeded:
		hops := f.path()
		v, at := outcome.Decide(hops)
		if at == nil {
			return ending{v, "Antrea finished the trace, but no observation says where the packet's path ended", nil}, true
		}
		f.decided = at
		return ending{v, outcome.Describe(v, *at, f.dst), nil}, true
	case traceflow.PhaseFailed:
		v, reason, err := failure(tf.Status.Reason)
		if v == outcome.Incomplete {
			// Antrea times a trace out when the sender's or the
			// receiver's result is missing, even where an agent saw
			// the packet's end: an agent's status write can be lost
			// (lostWrite). What an agent saw is the packet's fate; the
			// missing part is said.
			if dv, at := outcome.Decide(f.path()); at != nil {
				f.decided = at
				return ending{dv, outcome.Describe(dv, *at, f.dst) + "; " + f.missing(tf.Status.Reason), nil}, true
			}
			reason = f.reported(reason)
		}
		return ending{v, reason, err}, true
	}
	return ending{}, false
}
