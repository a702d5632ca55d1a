package helpermode

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Ending the helpers. A receiver the probe never reached still waits, its
// catch flows in the bridge, when the verdict is known. Deleting its pod
// at once (grace period 0) removes the API object, but the kubelet stops
// the container a moment later, and the helper deletes its flows on that
// SIGTERM: the plugin would exit while the flows are still there (measured
// in the lab's OVN mode: six catch flows for up to a second after the
// plugin returned). So the plugin asks the kubelet to stop the helpers
// (a graceful delete: SIGTERM), waits until each has said on its last line
// that its flows are gone, or has ended without any, and only then removes
// the pods.

// settleWait bounds the wait for the helpers to say their flows are gone.
const settleWait = 3 * time.Second

// settle stops the helpers, waits for their word and deletes their pods.
// It returns an error only when the pods could not be deleted; helpers
// that did not confirm are warned about, with how to remove their flows.
func (t *tracer) settle(ctx context.Context) error {
	// A helper still waiting for its go reads end of input: it does not
	// start. One that started keeps its input, and with it the attach that
	// carries its last lines (the cleanup line), until it is settled.
	for _, h := range t.helpers {
		if !h.goSent {
			_ = h.goW.Close()
		}
	}
	defer func() {
		for _, h := range t.helpers {
			_ = h.goW.Close()
		}
	}()
	if t.cfg.Pool != nil {
		return t.settleShared(ctx)
	}
	if len(t.unsettled()) > 0 {
		if err := whileAway(ctx, func(c context.Context) error { return t.r.Cluster.StopPods(c, t.cfg.Namespace, t.plan.Trace) }); err != nil {
			t.r.warn("could not stop the helper pods (%v): deleting them at once", err)
		} else {
			t.waitSettled(ctx)
		}
	}
	err := whileAway(ctx, func(c context.Context) error { return t.r.Cluster.DeletePods(c, t.cfg.Namespace, t.plan.Trace) })
	for _, h := range t.sortedHelpers() {
		if msg := h.leftover(t.cfg.Bridge); msg != "" {
			t.r.warn("helper on node %s %s", h.node, msg)
		}
	}
	if err != nil {
		return fmt.Errorf("delete helper pods (run `kubectl traceflow cleanup`): %w", err)
	}
	return nil
}

// settleShared stops the trace's parts on the shared helpers and waits for
// their word; the pool removes its pods when the run ends.
func (t *tracer) settleShared(ctx context.Context) error {
	if u := t.unsettled(); len(u) > 0 {
		for _, h := range u {
			t.cfg.Pool.Stop(h.node, h.pod)
		}
		t.waitSettled(ctx)
	}
	for _, h := range t.sortedHelpers() {
		if h.created {
			t.cfg.Pool.Forget(h.node, h.pod)
		}
		if msg := h.leftover(t.cfg.Bridge); msg != "" {
			t.r.warn("helper on node %s %s", h.node, msg)
		}
	}
	return nil
}

// unsettled lists the helpers that may still have flows in a bridge.
func (t *tracer) unsettled() []*helper {
	var out []*helper
	for _, h := range t.sortedHelpers() {
		if h.created && !h.settled {
			out = append(out, h)
		}
	}
	return out
}

// waitSettled follows the helpers' logs and pods until every helper has
// settled, or settleWait has passed.
func (t *tracer) waitSettled(ctx context.Context) {
	wait := t.r.SettleWait
	if wait <= 0 {
		wait = settleWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for len(t.unsettled()) > 0 {
		select {
		case m := <-t.lines:
			if h := t.helpers[m.pod]; h != nil {
				t.noteSettled(h, m)
			}
		case e, ok := <-t.pods.ResultChan():
			if !ok {
				t.pods = watch.NewEmptyWatch() // the logs may still say it
				continue
			}
			t.podSettled(e)
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// noteSettled marks a helper settled by a line of its log: its cleanup
// line, an error line (written after its cleanup line, if it had flows to
// clean), or the end of its log (its process is gone).
func (t *tracer) noteSettled(h *helper, m lineMsg) {
	switch {
	case m.eof != nil || m.problem != "":
		h.settled = true
	case m.text != "" || m.attachErr != nil:
	case m.line.Type == report.TypeCleanup:
		h.settled, h.cleanup = true, m.line.Cleanup
	case m.line.Type == report.TypeError:
		h.settled = true
	}
}

// podSettled marks a helper settled when its pod is gone (a graceful
// delete completes once the kubelet has stopped its container) or its
// container has terminated.
func (t *tracer) podSettled(e watch.Event) {
	p, ok := e.Object.(*corev1.Pod)
	if !ok {
		return
	}
	h := t.helpers[p.Name]
	if h == nil {
		return
	}
	if e.Type == watch.Deleted {
		h.settled = true
		return
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			h.settled = true
		}
	}
}

// leftover says what a helper may have left in its node's bridge, or ""
// when nothing: a helper whose container never started installed nothing.
func (h *helper) leftover(bridge string) string {
	if bridge == "" {
		bridge = "br-int"
	}
	how := ""
	if h.cookie != "" {
		how = fmt.Sprintf(": to remove them now, run on the node: ovs-ofctl del-flows %s cookie=%s/0xffffffffffffff00", bridge, h.cookie)
	}
	switch {
	case h.cleanup != nil && h.cleanup.Error != "":
		return fmt.Sprintf("could not remove its flows (%s); they expire within %ds of being installed%s", h.cleanup.Error, h.cleanup.HardTimeout, how)
	case h.cleanup != nil && h.cleanup.FlowsLeft > 0:
		return fmt.Sprintf("left %d flows after removing them (another client re-adding them?); they expire within %ds of being installed%s", h.cleanup.FlowsLeft, h.cleanup.HardTimeout, how)
	case !h.settled && h.streaming:
		return fmt.Sprintf("did not confirm within %s that its flows are gone; they expire by their hard timeout (the trace's timeout)%s", settleWait, how)
	}
	return ""
}
