package helpermode

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A stopped kubelet: the Node stays Ready for the node controller's grace
// period (40 s or more), and a helper pod bound to it stays Pending with
// nothing to say, until the trace's timeout. The kubelet's own heartbeat
// says it sooner: it renews its Lease in kube-node-lease every quarter of
// the Lease's duration (10 s of 40 s). The rule: a node whose Lease was
// last renewed more than half its duration ago (two renewals missed), by
// the API server's clock, while the API server has been answering the
// plugin for at least a quarter of that duration plus 2 s, has no running
// kubelet, and a helper pod that has not started there never will.
//
// The second condition is for an API server that was away: no kubelet
// could renew meanwhile, and each renews within one period once it answers
// again (its lease controller retries at least every 7 s, and renews every
// 10 s). A CI run traced 7 s after the lab's API server came back from a
// 15 s restart and was told the receiver's kubelet had stopped: its Lease
// was 22 s old, and it was renewed a second later. A Lease that is stale
// early in a trace is therefore read again once the API server has been
// answering long enough; a kubelet stopped before or during the trace is
// still found as soon as its Lease goes stale after that.

// staleFraction is the part of the Lease's duration after which an
// unrenewed Lease means the kubelet has stopped.
const staleFraction = 2

// defaultNodeLeaseDuration is the kubelet's default, for a Lease that
// says none.
const defaultNodeLeaseDuration = 40 * time.Second

// recheckAfter is when to read a Lease again that could not be read (the
// API server briefly away): the kubelet's renewal period.
const recheckAfter = 10 * time.Second

// leaseDuration is the Lease's duration, or the kubelet's default.
func leaseDuration(l *coordinationv1.Lease) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return defaultNodeLeaseDuration
}

// leaseConfirm is how long the API server must have been answering before
// a stale Lease counts as a stopped kubelet.
func (r *Runner) leaseConfirm(l *coordinationv1.Lease) time.Duration {
	if r.LeaseConfirm > 0 {
		return r.LeaseConfirm
	}
	return leaseDuration(l)/4 + 2*time.Second
}

// leaseVerdict says whether lease is stale at serverNow and, if not, how
// long until it would be.
func leaseVerdict(l *coordinationv1.Lease, serverNow time.Time) (age time.Duration, stale bool, until time.Duration) {
	limit := leaseDuration(l) / staleFraction
	if l.Spec.RenewTime == nil {
		return 0, false, limit
	}
	age = serverNow.Sub(l.Spec.RenewTime.Time)
	if age > limit {
		return age, true, 0
	}
	return age, false, limit - age
}

// nodeDown is a watcher's word that a node's kubelet has stopped.
type nodeDown struct {
	node string
	age  time.Duration
}

// watchNode reads node's Lease when it would go stale and says so on down
// if it has, once the API server has answered the watch's reads for
// leaseConfirm (else it reads again when it will have); a Lease renewed
// meanwhile re-arms the check for the moment it would go stale next. It
// stops when ctx ends, or when the Lease cannot be read for want of rights
// or because the node has none.
func (t *tracer) watchNode(ctx context.Context, node string, down chan<- nodeDown) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	// answering is since when the API server has answered every read:
	// since the watch began (the plugin's calls before it were answered),
	// or since the first read that worked after one that failed.
	answering := t.r.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		l, err := t.r.NodeLease(ctx, node)
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			return
		case err != nil:
			answering = time.Time{}
			timer.Reset(recheckAfter)
			continue
		}
		if answering.IsZero() {
			answering = t.r.Now()
		}
		now := t.r.Now()
		if t.r.ServerNow != nil {
			if s, ok := t.r.ServerNow(); ok {
				now = s
			}
		}
		age, stale, until := leaseVerdict(l, now)
		if stale {
			if wait := t.r.leaseConfirm(l) - t.r.Now().Sub(answering); wait > 0 {
				timer.Reset(wait)
				continue
			}
			select {
			case down <- nodeDown{node: node, age: age}:
			case <-ctx.Done():
			}
			return
		}
		// The server's clock is known to the second (its Date header):
		// look a second after the moment.
		timer.Reset(until + time.Second)
	}
}

// startNodeWatch starts watching the kubelet of node, once per node, while
// a helper there has not started.
func (t *tracer) startNodeWatch(ctx context.Context, node string) {
	if t.r.NodeLease == nil || t.nodeWatches[node] != nil {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	t.nodeWatches[node] = cancel
	go t.watchNode(wctx, node, t.nodesDown)
}

// stopNodeWatch stops watching node's kubelet: every helper there has
// started, and their reports say the rest.
func (t *tracer) stopNodeWatch(node string) {
	if cancel := t.nodeWatches[node]; cancel != nil {
		cancel()
	}
}
