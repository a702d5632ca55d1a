// Package agentmode runs a trace through Antrea: it creates the Traceflow
// object, watches it (no polling) while Antrea's controller and agents fill
// its status, turns each new observation into a view update, and deletes
// the object at the end unless asked to keep it.
//
// What real Antrea (v2.3.2) writes, and this package reads: results carry
// no role, and their order varies (the receiver's often comes first); the
// dataplane tag is removed from the status when the trace succeeds; the
// receiver's first observation is {Forwarding, Received} without
// componentInfo; Delivered names no pod.
package agentmode

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/apierr"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Runner runs agent-mode traces.
type Runner struct {
	Records traceflow.Client
	Now     func() time.Time
	Emit    func(outcome.Update)
	// SourceNode is the node of the source pod, where the sender's result
	// comes from when its observations do not say so themselves.
	SourceNode string
	// Slack is how long past the trace's own timeout to wait for Antrea's
	// controller to write the final phase (default 10 s).
	Slack time.Duration
	// Explainer names the policy behind a drop that Antrea leaves unnamed
	// (a Kubernetes NetworkPolicy's default deny); nil leaves it unnamed.
	Explainer outcome.DropExplainer
	// Blind says why Antrea's agents will not see this trace's end (a
	// Service without endpoints; engine.Facts.AgentBlind): a trace that
	// times out with no end seen says it, and what to do.
	Blind string
}

// Outcome is how the trace ended.
type Outcome struct {
	// Ended is how every trace ends, whichever engine ran it.
	outcome.Ended
	// Resumed counts the watches that ended early (expired, or "Too large
	// resource version" where etcd sends no progress notifications) and
	// were resumed.
	Resumed int
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

	f := &follower{r: r, name: created.Name, nodes: map[string]*nodeSeen{}, dst: started.DestinationKind}
	end := f.follow(ctx, created)
	out.Verdict, out.Reason, out.Decided, out.Resumed = end.verdict, end.reason, f.decided, f.resumed
	r.Emit(outcome.Finished{At: outcome.At{Time: r.Now()}, Verdict: out.Verdict, Reason: out.Reason, Decided: out.Decided})
	return out, end.err
}

// apiFailure says what a failed Traceflow call needs, naming a missing verb.
func apiFailure(err error, verb string) error {
	return apierr.Wrap(err, apierr.Messages{
		Forbidden: apierr.Say{Before: "not allowed to " + verb + " traceflows.crd.antrea.io: grant it (see the README's RBAC section): "},
		Other:     apierr.Say{Before: verb + " Traceflow: "},
	})
}
