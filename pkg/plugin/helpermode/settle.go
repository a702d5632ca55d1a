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

// settle stops the helpers, waits for their word and lets them go (their
// pods deleted, or their parts on shared helpers forgotten). It returns an
// error only when the pods could not be deleted; helpers that did not
// confirm are warned about, with how to remove their flows.
func (t *tracer) settle(ctx context.Context) error {
	// A helper still waiting for its go reads end of input: it does not
	// start. One that started keeps its input, and with it the attach that
	// carries its last lines (the cleanup line), until it is settled.
	t.fleet.closeInputs(true)
	defer t.fleet.closeInputs(false)
	if u := t.m.unsettled(); len(u) > 0 {
		if err := t.fleet.stop(ctx, u); err != nil {
			t.r.warn("could not stop the helper pods (%v): deleting them at once", err)
		} else {
			t.waitSettled(ctx)
		}
	}
	helpers := t.m.sortedHelpers()
	err := t.fleet.release(ctx, helpers)
	for _, h := range helpers {
		if msg := h.leftover(t.cfg.Bridge); msg != "" {
			t.r.warn("helper on node %s %s", h.node, msg)
		}
	}
	return err
}

// unsettled lists the helpers that may still have flows in a bridge.
func (m *machine) unsettled() []*helper {
	var out []*helper
	for _, h := range m.sortedHelpers() {
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
	for len(t.m.unsettled()) > 0 {
		select {
		case msg := <-t.lines:
			t.m.settledBy(evLine{msg: msg})
		case e, ok := <-t.pods.ResultChan():
			if !ok {
				// The logs may still say it; a watch that never fires, not a
				// closed one, which would spin this loop until the timer.
				t.pods = watch.NewFake()
				continue
			}
			t.m.settledBy(evPod{e: e})
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// settledBy folds an event that comes once the trace has ended: only
// whether a helper has settled matters then.
func (m *machine) settledBy(ev event) {
	switch ev := ev.(type) {
	case evLine:
		if h := m.helpers[ev.msg.pod]; h != nil {
			m.noteSettled(h, ev.msg)
		}
	case evPod:
		m.podSettled(ev.e)
	}
}

// noteSettled marks a helper settled by a line of its log: its cleanup
// line, an error line (written after its cleanup line, if it had flows to
// clean), or the end of its log (its process is gone).
func (m *machine) noteSettled(h *helper, msg lineMsg) {
	switch {
	case msg.line.Reply:
		// The answer's cleanup line comes before the probe's, which
		// says the helper's flows are all gone.
	case msg.eof != nil || msg.problem != "":
		h.settled = true
	case msg.text != "" || msg.attachErr != nil:
	case msg.line.Type == report.TypeCleanup:
		h.settled, h.cleanup = true, msg.line.Cleanup
	case msg.line.Type == report.TypeError:
		h.settled = true
	}
}

// podSettled marks a helper settled when its pod is gone (a graceful
// delete completes once the kubelet has stopped its container) or its
// container has terminated.
func (m *machine) podSettled(e watch.Event) {
	p, ok := e.Object.(*corev1.Pod)
	if !ok {
		return
	}
	h := m.helpers[p.Name]
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
