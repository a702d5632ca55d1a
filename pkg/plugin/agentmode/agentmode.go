// Package agentmode runs a trace through Antrea: it creates the Traceflow
// object, watches it (no polling) while Antrea's controller and agents fill
// its status, turns each new observation into a view update, and deletes
// the object at the end unless asked to keep it.
package agentmode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Runner runs agent-mode traces.
type Runner struct {
	Records traceflow.Client
	Now     func() time.Time
	Emit    func(outcome.Update)
	// Slack is how long past the trace's own timeout to wait for Antrea's
	// controller to write the final phase (default 10 s).
	Slack time.Duration
}

// Outcome is how the trace ended.
type Outcome struct {
	Verdict outcome.Verdict
	Reason  string
	// Decided is the hop that decided the verdict (nil for Incomplete and
	// Failed).
	Decided *outcome.Hop
}

// Run creates tf and follows it to its end.
func (r *Runner) Run(ctx context.Context, tf *traceflow.Traceflow, started outcome.TraceStarted, keep bool) (out Outcome, err error) {
	timeout := time.Duration(tf.Spec.Timeout) * time.Second
	if timeout <= 0 {
		timeout = traceflow.DefaultTimeoutSeconds * time.Second
	}
	slack := r.Slack
	if slack == 0 {
		slack = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+slack)
	defer cancel()

	// Watch first, so that no status written right after creation is missed.
	w, err := r.Records.Watch(ctx, tf.Name)
	if err != nil {
		return out, apiFailure(err, "watch")
	}
	defer w.Stop()
	created, err := r.Records.Create(ctx, tf)
	if err != nil {
		return out, apiFailure(err, "create")
	}
	defer func() {
		if keep {
			return
		}
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if derr := r.Records.Delete(c, created.Name); derr != nil && !apierrors.IsNotFound(derr) {
			err = errors.Join(err, fmt.Errorf("delete Traceflow %s: %w", created.Name, derr))
		}
	}()
	started.Time = r.Now()
	r.Emit(started)

	f := &follower{r: r, seen: map[string]int{}, dst: started.DestinationKind}
	out.Verdict, out.Reason, err = f.loop(ctx, w)
	out.Decided = f.decided
	r.Emit(outcome.Finished{At: outcome.At{Time: r.Now()}, Verdict: out.Verdict, Reason: out.Reason, Decided: out.Decided})
	return out, err
}

type follower struct {
	r       *Runner
	seen    map[string]int // observations already emitted, per node
	hops    []outcome.TimedHop
	running bool
	dst     outcome.DestinationKind
	// decided is the hop that decided the verdict, once Antrea finished.
	decided *outcome.Hop
}

func (f *follower) loop(ctx context.Context, w watch.Interface) (outcome.Verdict, string, error) {
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				if !f.running {
					// Antrea leaves a trace without a phase while all its
					// dataplane tags are taken, retrying in the background.
					msg := "Antrea never started the trace: all its dataplane tags may be held by running traces, or antrea-controller is not processing Traceflows"
					return outcome.Failed, msg, exitcode.Errorf(exitcode.Setup, "%s; retry later, check the antrea-controller logs, or use --engine helper", msg)
				}
				return outcome.Incomplete, "Antrea did not finish the trace within its timeout", nil
			}
			return outcome.Incomplete, "interrupted", exitcode.Errorf(exitcode.Timeout, "trace interrupted before Antrea finished it")
		case e, ok := <-w.ResultChan():
			if !ok {
				return outcome.Failed, "watch closed", exitcode.Errorf(exitcode.Setup, "the API server closed the watch on the Traceflow: run the trace again")
			}
			if e.Type == watch.Error {
				return outcome.Failed, "watch error", exitcode.Errorf(exitcode.Setup, "watching the Traceflow: %v", apierrors.FromObject(e.Object))
			}
			tf, err := traceflow.FromObject(e.Object)
			if err != nil {
				continue
			}
			if e.Type == watch.Deleted {
				return outcome.Failed, "deleted", exitcode.Errorf(exitcode.Setup, "Traceflow %s was deleted before it finished", tf.Name)
			}
			f.emitNew(tf)
			switch tf.Status.Phase {
			case traceflow.PhaseRunning:
				f.running = true
			case traceflow.PhaseSucceeded:
				v, at := outcome.Decide(f.hops)
				if at == nil {
					return v, "Antrea finished the trace, but no observation says where the packet's path ended", nil
				}
				f.decided = at
				return v, outcome.Describe(v, *at, f.dst), nil
			case traceflow.PhaseFailed:
				return failure(tf.Status.Reason)
			}
		}
	}
}

// emitNew turns observations not yet shown into view updates.
func (f *follower) emitNew(tf *traceflow.Traceflow) {
	now := f.r.Now()
	for _, res := range tf.Status.Results {
		if f.seen[res.Node] == 0 && len(res.Observations) > 0 {
			f.r.Emit(outcome.HelperReady{At: outcome.At{Time: now}, Node: res.Node, Role: res.Role, Version: "antrea-agent"})
			if res.Role == report.RoleSender {
				f.r.Emit(outcome.Injected{At: outcome.At{Time: now}, Node: res.Node})
			}
		}
		seen := f.seen[res.Node]
		if len(res.Observations) <= seen {
			// Nothing new. A list shorter than what was shown (a status
			// rewritten by another writer, an older object from a relisting
			// watch) neither panics nor shows its hops a second time.
			continue
		}
		for _, o := range res.Observations[seen:] {
			o.Action = o.Action.Normalize()
			h := outcome.Hop{Node: res.Node, Role: res.Role, Observation: o, TableName: o.ComponentInfo}
			f.hops = append(f.hops, outcome.TimedHop{Hop: h, At: now})
			f.r.Emit(outcome.Observed{At: outcome.At{Time: now}, Hop: h})
		}
		f.seen[res.Node] = len(res.Observations)
	}
}

// failure maps Antrea's failure reasons to verdicts and exit codes.
func failure(reason string) (outcome.Verdict, string, error) {
	lower := strings.ToLower(reason)
	switch {
	case strings.Contains(lower, "timeout"):
		return outcome.Incomplete, "Antrea: " + reason, nil
	case strings.Contains(lower, "exceed") || strings.Contains(lower, "dataplane tag"):
		msg := "Antrea has no free dataplane tag (too many traces at once): retry when running traces finish, or use --engine helper"
		return outcome.Failed, msg, exitcode.Errorf(exitcode.Setup, "%s (Antrea: %s)", msg, reason)
	default:
		msg := "Antrea could not run the trace: " + reason
		return outcome.Failed, msg, exitcode.Errorf(exitcode.Setup, "%s; check the antrea-controller and antrea-agent logs", msg)
	}
}

func apiFailure(err error, verb string) error {
	if apierrors.IsForbidden(err) {
		return exitcode.Errorf(exitcode.Setup, "not allowed to %s traceflows.crd.antrea.io: grant it (see the README's RBAC section): %w", verb, err)
	}
	return exitcode.Errorf(exitcode.Setup, "%s Traceflow: %w", verb, err)
}
