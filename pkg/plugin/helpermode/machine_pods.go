package helpermode

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// The machine's reading of its helpers' pods: their status from the watch
// on them, the kubelet's events about them, a node whose kubelet stopped.

func (m *machine) onPod(now time.Time, e watch.Event) *ending {
	n, ok := readPod(e, m.image)
	if !ok {
		return nil
	}
	h := m.helpers[n.pod]
	if h == nil || h.ended {
		return nil
	}
	if n.deleted {
		return m.fail(h, "its pod was deleted before it reported (by `kubectl traceflow cleanup` or an operator?)")
	}
	// A helper that streams already says what went wrong itself.
	if n.problem != "" && !h.streaming {
		return m.fail(h, n.problem)
	}
	if n.waiting != "" && n.waiting != h.waiting && !h.ready {
		h.waiting = n.waiting
		m.emitWaiting(now, h)
	}
	if n.started {
		m.containerStarted(now, h)
	}
	return nil
}

// containerStarted reads the helper's report, from its log or through an
// attach, once its container runs. The kubelet's "Started" event says so
// at once; the pod's status can lag by a second or more, so whichever
// comes first starts it. A container is attached to as soon as it runs,
// where its log is served only once the kubelet's pod-lifecycle relist has
// seen it.
func (m *machine) containerStarted(now time.Time, h *helper) {
	if h.streaming {
		return
	}
	h.streaming = true
	m.unwatchNode(h.node)
	m.out = append(m.out, effStream{pod: h.pod, attach: m.parallel})
	if !m.parallel {
		return
	}
	if h.role == report.RoleReceiver {
		m.sendGo(h)
	} else if !h.ready && len(m.receivers) > 0 {
		h.waiting = "waiting for the receivers"
		m.emitWaiting(now, h)
	}
}

// unwatchNode stops watching node's kubelet once every helper there has
// started: their reports say the rest.
func (m *machine) unwatchNode(node string) {
	for _, h := range m.helpers {
		if h.node == node && h.created && !h.streaming {
			return
		}
	}
	m.out = append(m.out, effUnwatchNode{node: node})
}

func (m *machine) onKubelet(now time.Time, ev *corev1.Event) *ending {
	n := readKubelet(ev, m.ovsRunDir, m.image)
	h := m.helpers[n.pod]
	if h == nil || h.ready || h.ended {
		return nil
	}
	if n.started {
		m.containerStarted(now, h)
		return nil
	}
	if n.problem != "" {
		return m.fail(h, n.problem)
	}
	if n.waiting != "" && n.waiting != h.waiting {
		h.waiting = n.waiting
		m.emitWaiting(now, h)
	}
	return nil
}

// onNodeDown ends the trace when a helper on the node has not started.
func (m *machine) onNodeDown(d nodeDown) *ending {
	for _, h := range m.sortedHelpers() {
		if h.node == d.node && h.created && !h.streaming && !h.ended {
			return m.fail(h, fmt.Sprintf("its pod cannot start: the node's kubelet has not renewed its Lease kube-node-lease/%s for %s by the API server's clock (a running kubelet renews it every %s), though the Node may still look Ready: check the kubelet on %s",
				d.node, d.age.Round(time.Second), defaultNodeLeaseDuration/4, d.node))
		}
	}
	return nil
}
