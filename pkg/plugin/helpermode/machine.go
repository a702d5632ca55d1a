package helpermode

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// The lifecycle of one trace's helpers is a state machine: events in,
// effects out. It does no I/O and reads no clock (every event carries the
// time it was seen), so that each path a trace can take, on pods of its
// own or on a check run's shared helpers, is one piece of code, and is
// tested as a table of events and the effects they ask for. The loop
// (loop.go) turns what the cluster says into events and carries out the
// effects through a fleet (fleet.go).

// event is something the loop saw.
type event interface{ isEvent() }

// evBegin starts the trace: its helpers are created.
type evBegin struct{ now time.Time }

// evCreated says how the create asked for by effCreate went: err, or
// what the helper waits for now ("" for nothing).
type evCreated struct {
	now     time.Time
	pod     string
	waiting string
	err     error
}

// evPod is a change of a helper pod, from the watch on them.
type evPod struct {
	now time.Time
	e   watch.Event
}

// evKubelet is an event about a pod (the kubelet's pulls, mounts, starts).
type evKubelet struct {
	now time.Time
	ev  *corev1.Event
}

// evPodWatchClosed: the API server closed the watch on the helper pods.
type evPodWatchClosed struct{}

// evLine is a line of a helper's stream. hop, for an observation, is the
// hop as the loop explained it (explaining a drop reads the API, which the
// machine does not); nil lets the machine make it from the line.
type evLine struct {
	now time.Time
	msg lineMsg
	hop *outcome.Hop
}

// evNodeDown: a node's kubelet has stopped (nodelease.go).
type evNodeDown struct{ down nodeDown }

// evDone: the trace's context ended; deadline says by its deadline, not by
// an interrupt.
type evDone struct{ deadline bool }

func (evBegin) isEvent()          {}
func (evCreated) isEvent()        {}
func (evPod) isEvent()            {}
func (evKubelet) isEvent()        {}
func (evPodWatchClosed) isEvent() {}
func (evLine) isEvent()           {}
func (evNodeDown) isEvent()       {}
func (evDone) isEvent()           {}

// effect is something the machine asks the loop to do.
type effect interface{ isEffect() }

// effCreate starts a helper: its pod, or its part on a shared helper.
type effCreate struct {
	pod, node string
	role      helperpod.Role
}

// effStream starts reading a helper's report, through an attach (whose
// input carries its go) or from its log.
type effStream struct {
	pod    string
	attach bool
}

// effSendGo writes a helper's go to its standard input.
type effSendGo struct{ pod string }

// effWatchNode and effUnwatchNode start and stop watching a node's kubelet
// while a helper there has not started.
type effWatchNode struct{ node string }
type effUnwatchNode struct{ node string }

// effEmit shows an update.
type effEmit struct{ u outcome.Update }

// effRecord adds a hop to the trace record.
type effRecord struct {
	hop outcome.Hop
	at  time.Time
}

// effEnd ends the trace: the loop stops and the helpers are settled.
type effEnd struct{ end ending }

func (effCreate) isEffect()      {}
func (effStream) isEffect()      {}
func (effSendGo) isEffect()      {}
func (effWatchNode) isEffect()   {}
func (effUnwatchNode) isEffect() {}
func (effEmit) isEffect()        {}
func (effRecord) isEffect()      {}
func (effEnd) isEffect()         {}

// machineConfig is what the machine knows of the trace before it starts.
type machineConfig struct {
	trace     string
	sender    string
	receivers []string
	// parallel: every helper is attached to (Config.ParallelStart): its
	// standard input carries its go, its standard output its report.
	parallel bool
	// shared: the helpers are a check run's (Pool): each streams its lines
	// from the moment it is handed its part.
	shared    bool
	namespace string
	image     string
	ovsRunDir string
	version   string
	timeout   time.Duration
	dstKind   outcome.DestinationKind
	// roundTrip: the helpers follow the answer too (reply.go).
	roundTrip bool
	// outside: the source is outside the cluster, the probe entered on
	// the sender's uplink, and the answer's way back ends going out of
	// it.
	outside bool
	// replyTranslated: the sender follows an answer that comes back to a
	// translated source (its --reply-translated).
	replyTranslated bool
}

// machine is the state of one trace's helpers.
type machine struct {
	machineConfig
	helpers map[string]*helper // by pod name
	sender  *helper
	hops    []outcome.TimedHop
	// pathEnd is the hop where the packet's path ended, once one reported it.
	pathEnd *outcome.Hop
	// toCreate are the helpers still to create at the start, in order;
	// begun: they all were.
	toCreate []*helper
	begun    bool
	// ended is how the trace ended, once it has.
	ended *ending
	// reply is the answer's way back, for a round trip (reply.go).
	reply replyState
	out   []effect
}

func newMachine(c machineConfig) *machine {
	m := &machine{machineConfig: c, helpers: map[string]*helper{}}
	receivers := append([]string(nil), c.receivers...)
	sort.Strings(receivers)
	for _, n := range receivers {
		m.toCreate = append(m.toCreate, m.newHelper(n, helperpod.RoleReceiver))
	}
	m.sender = m.newHelper(c.sender, helperpod.RoleSender)
	if c.parallel {
		// The sender's pod starts together with the receivers'; its go
		// waits for them.
		m.toCreate = append(m.toCreate, m.sender)
	}
	return m
}

func (m *machine) newHelper(node string, role helperpod.Role) *helper {
	name := helperpod.Name(m.trace, role, node)
	h := &helper{node: node, role: podRole(role), pod: name, podRole: role}
	m.helpers[name] = h
	return h
}

// step folds ev into the state and returns what to do about it. Once the
// trace has ended, events only say which helpers have settled (settle.go).
func (m *machine) step(ev event) []effect {
	m.out = nil
	if m.ended != nil {
		m.settledBy(ev)
		return nil
	}
	end := m.on(ev)
	if end != nil {
		end = m.holdForAnswer(end)
	}
	if end != nil {
		m.ended = end
		m.out = append(m.out, effEnd{end: *end})
	}
	return m.out
}

func (m *machine) on(ev event) *ending {
	switch ev := ev.(type) {
	case evBegin:
		return m.createNext(ev.now)
	case evCreated:
		return m.onCreated(ev)
	case evPod:
		return m.onPod(ev.now, ev.e)
	case evKubelet:
		return m.onKubelet(ev.now, ev.ev)
	case evPodWatchClosed:
		return &ending{verdict: outcome.Failed, reason: "pod watch closed", apiAway: true,
			err: exitcode.Errorf(exitcode.Setup, "the API server closed the watch on helper pods (restarted or unreachable?): the plugin removes the trace's helper pods, tag claim and record once it answers again (within 30 s); run the trace again")}
	case evLine:
		return m.onLine(ev)
	case evNodeDown:
		return m.onNodeDown(ev.down)
	case evDone:
		if m.reply.held != nil && ev.deadline {
			return m.replyDecided(true)
		}
		if ev.deadline {
			return &ending{verdict: outcome.Incomplete, reason: "no verdict within the trace's timeout plus the helpers' start-up time"}
		}
		return &ending{verdict: outcome.Incomplete, reason: "interrupted", err: exitcode.Errorf(exitcode.Timeout, "trace interrupted before it completed; its helper pods and tag were removed")}
	}
	return nil
}

func (m *machine) emit(u outcome.Update) { m.out = append(m.out, effEmit{u: u}) }

func (m *machine) emitWaiting(now time.Time, h *helper) {
	m.emit(outcome.HelperWaiting{At: outcome.At{Time: now}, Node: h.node, Role: h.role, Reason: h.waiting})
}

// request asks for h to be created.
func (m *machine) request(h *helper) {
	h.requested = true
	m.out = append(m.out, effCreate{pod: h.pod, node: h.node, role: h.podRole})
}

// createNext creates the helpers one after another, receivers first, each
// once the one before was: a create that fails ends the trace before the
// next. Once all are, the sender may start.
func (m *machine) createNext(now time.Time) *ending {
	if len(m.toCreate) > 0 {
		h := m.toCreate[0]
		m.toCreate = m.toCreate[1:]
		m.request(h)
		return nil
	}
	if m.begun {
		return nil
	}
	m.begun = true
	m.maybeStartSender()
	return nil
}

func (m *machine) onCreated(ev evCreated) *ending {
	h := m.helpers[ev.pod]
	if h == nil {
		return nil
	}
	if ev.err != nil {
		return &ending{verdict: outcome.Failed, reason: ev.err.Error(), err: ev.err}
	}
	h.created = true
	if m.shared {
		h.streaming = true // a shared helper runs its part the moment it is handed it
	} else {
		m.out = append(m.out, effWatchNode{node: h.node})
	}
	if ev.waiting != "" {
		h.waiting = ev.waiting
		m.emitWaiting(ev.now, h)
	}
	return m.createNext(ev.now)
}

// maybeStartSender lets the sender inject once every receiver is ready: it
// creates the sender, or, when the sender started in parallel, sends its
// go. No sleep: receivers say "ready" only after their flows are installed.
func (m *machine) maybeStartSender() {
	for _, h := range m.helpers {
		if h.role == report.RoleReceiver && !h.ready {
			return
		}
	}
	if !m.parallel {
		if !m.sender.requested {
			m.request(m.sender)
		}
		return
	}
	m.sendGo(m.sender)
}

// sendGo sends a helper its go, once.
func (m *machine) sendGo(h *helper) {
	if h.goSent {
		return
	}
	h.goSent = true
	m.out = append(m.out, effSendGo{pod: h.pod})
}

func (m *machine) fail(h *helper, problem string) *ending {
	msg := fmt.Sprintf("helper on node %s: %s", h.node, problem)
	return &ending{verdict: outcome.Failed, reason: msg, err: exitcode.Errorf(exitcode.Setup, "%s", msg)}
}

// sortedHelpers lists the helpers by pod name, for messages in a stable
// order.
func (m *machine) sortedHelpers() []*helper {
	names := slices.Sorted(maps.Keys(m.helpers))
	out := make([]*helper, 0, len(names))
	for _, n := range names {
		out = append(out, m.helpers[n])
	}
	return out
}
