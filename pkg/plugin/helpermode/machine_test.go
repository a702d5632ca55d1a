package helpermode

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// The machine is tested as a view model is: named cases of events in, and
// the effects each asks for, as text, then the helpers' state.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// step is an event and the effects it should ask for.
type step struct {
	ev   event
	want []string
}

// key names a helper in a case: role@node.
func podOf(key string) string {
	role, node, _ := strings.Cut(key, "@")
	return helperpod.Name("tf", helperpod.Role(role), node)
}

func begin() event                  { return evBegin{now: t0} }
func created(key string) event      { return evCreated{now: t0, pod: podOf(key), waiting: "scheduled"} }
func createdAs(key, w string) event { return evCreated{now: t0, pod: podOf(key), waiting: w} }
func line(key string, l report.Line) event {
	l.Time = t0
	return evLine{now: t0, msg: lineMsg{pod: podOf(key), line: l}}
}
func streamMsg(key string, m lineMsg) event { m.pod = podOf(key); return evLine{now: t0, msg: m} }

func podIn(key string, phase corev1.PodPhase, s corev1.ContainerState) event {
	p := &corev1.Pod{}
	p.Name = podOf(key)
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: helperpod.ContainerName, State: s}}
	return evPod{now: t0, e: watch.Event{Type: watch.Modified, Object: p}}
}

func running(key string) event {
	return podIn(key, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
}

func waitingFor(key, reason string) event {
	return podIn(key, corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}})
}

func kubelet(key, reason, msg string) event {
	return evKubelet{now: t0, ev: &corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: podOf(key)}, Reason: reason, Message: msg}}
}

var (
	deliveredLine = obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionDelivered, Pod: "default/pod-b"}, 20, "Output", "f")
	tunnelledLine = obsLine(report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded, TunnelDstIP: "10.0.0.2"}, 20, "Output", "f")
)

// describe writes an effect as a line of text; keys maps pod names back to
// their role@node.
func describe(e effect, keys map[string]string) string {
	switch e := e.(type) {
	case effCreate:
		return "create " + keys[e.pod]
	case effStream:
		if e.attach {
			return "attach " + keys[e.pod]
		}
		return "follow " + keys[e.pod]
	case effSendGo:
		return "go " + keys[e.pod]
	case effWatchNode:
		return "watch kubelet " + e.node
	case effUnwatchNode:
		return "unwatch kubelet " + e.node
	case effRecord:
		return fmt.Sprintf("record %s %s", e.hop.Node, e.hop.Observation.Action)
	case effEnd:
		s := fmt.Sprintf("end %s: %s", e.end.verdict, e.end.reason)
		if e.end.err != nil {
			s += fmt.Sprintf(" (exit %d)", exitcode.Of(e.end.err))
		}
		if e.end.apiAway {
			s += " (API away)"
		}
		return s
	case effEmit:
		switch u := e.u.(type) {
		case outcome.HelperWaiting:
			return fmt.Sprintf("show %s@%s %s", strings.ToLower(string(u.Role)), u.Node, u.Reason)
		case outcome.HelperReady:
			return fmt.Sprintf("show %s@%s ready", strings.ToLower(string(u.Role)), u.Node)
		case outcome.Injected:
			return "show injected on " + u.Node
		case outcome.Observed:
			return fmt.Sprintf("show hop %s %s", u.Hop.Node, u.Hop.Observation.Action)
		case outcome.Warning:
			return "show warning " + u.Message
		}
	}
	return fmt.Sprintf("%#v", e)
}

// state writes each helper's flags, sorted by key.
func state(m *machine, keys map[string]string) []string {
	var out []string
	for _, h := range m.sortedHelpers() {
		var flags []string
		for _, f := range []struct {
			on   bool
			name string
		}{{h.created, "created"}, {h.streaming, "streaming"}, {h.goSent, "go"}, {h.ready, "ready"}, {h.ended, "ended"}, {h.settled, "settled"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		out = append(out, keys[h.pod]+": "+strings.Join(flags, " "))
	}
	slices.Sort(out)
	return out
}

func TestMachine(t *testing.T) {
	pods := machineConfig{trace: "tf", sender: "n1", receivers: []string{"n2"}, namespace: "ns", image: "img", timeout: 10 * time.Second}
	parallel := pods
	parallel.parallel = true
	local := pods
	local.receivers = nil
	shared := pods
	shared.shared = true
	twoReceivers := pods
	twoReceivers.receivers = []string{"n3", "n2"}
	started := []step{
		{begin(), []string{"create receiver@n2"}},
		{created("receiver@n2"), []string{"watch kubelet n2", "show receiver@n2 scheduled"}},
		{running("receiver@n2"), []string{"unwatch kubelet n2", "follow receiver@n2"}},
		{line("receiver@n2", readyLine(report.RoleReceiver)), []string{"show receiver@n2 ready", "create sender@n1"}},
		{created("sender@n1"), []string{"watch kubelet n1", "show sender@n1 scheduled"}},
		{kubelet("sender@n1", "Started", ""), []string{"unwatch kubelet n1", "follow sender@n1"}},
		{line("sender@n1", readyLine(report.RoleSender)), []string{"show sender@n1 ready", "show injected on n1"}},
	}
	cases := []struct {
		name  string
		cfg   machineConfig
		steps []step
		state []string
	}{{
		name: "receivers first, then the sender once they are ready",
		cfg:  pods,
		steps: append(started[:len(started):len(started)],
			step{line("sender@n1", tunnelledLine), []string{"show hop n1 Forwarded", "record n1 Forwarded"}},
			step{line("sender@n1", resultLine("n1", report.RoleSender, 0)), nil},
			step{line("receiver@n2", deliveredLine), []string{"show hop n2 Delivered", "record n2 Delivered",
				"end Delivered: delivered to default/pod-b on n2"}},
		),
		state: []string{"receiver@n2: created streaming ready", "sender@n1: created streaming ready ended"},
	}, {
		name: "a tunnelled probe waits for the receivers, then is incomplete",
		cfg:  pods,
		steps: append(started[:len(started):len(started)],
			step{line("sender@n1", tunnelledLine), []string{"show hop n1 Forwarded", "record n1 Forwarded"}},
			step{line("sender@n1", resultLine("n1", report.RoleSender, 0)), nil},
			step{line("receiver@n2", resultLine("n2", report.RoleReceiver, 0)), []string{
				"end Incomplete: the probe went into the tunnel on n1 but no receiver reported it within 10s: check the underlay between the nodes"}},
		),
		state: []string{"receiver@n2: created streaming ready ended", "sender@n1: created streaming ready ended"},
	}, {
		name: "a sender's own delivery ends the trace at once",
		cfg:  local,
		steps: []step{
			{begin(), []string{"create sender@n1"}},
			{created("sender@n1"), []string{"watch kubelet n1", "show sender@n1 scheduled"}},
			{running("sender@n1"), []string{"unwatch kubelet n1", "follow sender@n1"}},
			{line("sender@n1", deliveredLine), []string{"show hop n1 Delivered", "record n1 Delivered",
				"end Delivered: delivered to default/pod-b on n1"}},
			{line("sender@n1", report.Line{Type: report.TypeCleanup, Cleanup: &report.Cleanup{}}), nil},
		},
		state: []string{"sender@n1: created streaming settled"},
	}, {
		name: "parallel start: every pod at once, the sender's go once the receivers are ready",
		cfg:  parallel,
		steps: []step{
			{begin(), []string{"create receiver@n2"}},
			{created("receiver@n2"), []string{"watch kubelet n2", "show receiver@n2 scheduled", "create sender@n1"}},
			{created("sender@n1"), []string{"watch kubelet n1", "show sender@n1 scheduled"}},
			{running("sender@n1"), []string{"unwatch kubelet n1", "attach sender@n1", "show sender@n1 waiting for the receivers"}},
			{running("receiver@n2"), []string{"unwatch kubelet n2", "attach receiver@n2", "go receiver@n2"}},
			{line("receiver@n2", readyLine(report.RoleReceiver)), []string{"show receiver@n2 ready", "go sender@n1"}},
		},
		state: []string{"receiver@n2: created streaming go ready", "sender@n1: created streaming go"},
	}, {
		name: "a create that fails stops the rest",
		cfg:  twoReceivers,
		steps: []step{
			{begin(), []string{"create receiver@n2"}},
			{evCreated{now: t0, pod: podOf("receiver@n2"), err: exitcode.Errorf(exitcode.Setup, "not allowed")}, []string{"end Failed: not allowed (exit 4)"}},
		},
		state: []string{"receiver@n2: ", "receiver@n3: ", "sender@n1: "},
	}, {
		name: "an image that cannot be pulled fails the trace",
		cfg:  local,
		steps: []step{
			{begin(), []string{"create sender@n1"}},
			{created("sender@n1"), []string{"watch kubelet n1", "show sender@n1 scheduled"}},
			{kubelet("sender@n1", "Pulling", ""), []string{"show sender@n1 pulling image"}},
			{waitingFor("sender@n1", "ImagePullBackOff"), []string{"end Failed: helper on node n1: cannot pull the helper image img: check --helper-image and that the node can reach its registry (ImagePullBackOff: m); " + BuildImageHint + " (exit 4)"}},
		},
		state: []string{"sender@n1: created"},
	}, {
		name: "a node without OVS fails the trace",
		cfg:  local,
		steps: []step{
			{begin(), []string{"create sender@n1"}},
			{created("sender@n1"), []string{"watch kubelet n1", "show sender@n1 scheduled"}},
			{kubelet("sender@n1", "FailedMount", "hostPath type check failed"), []string{"end Failed: helper on node n1: the node has no Open vSwitch run directory /var/run/openvswitch: check that OVS runs on this node, or pass --ovs-rundir with its run directory (exit 4)"}},
		},
		state: []string{"sender@n1: created"},
	}, {
		name: "a stopped kubelet fails a helper there that has not started",
		cfg:  pods,
		steps: []step{
			{begin(), []string{"create receiver@n2"}},
			{created("receiver@n2"), []string{"watch kubelet n2", "show receiver@n2 scheduled"}},
			{evNodeDown{down: nodeDown{node: "n1", age: time.Minute}}, nil},
			{evNodeDown{down: nodeDown{node: "n2", age: time.Minute}}, []string{"end Failed: helper on node n2: its pod cannot start: the node's kubelet has not renewed its Lease kube-node-lease/n2 for 1m0s by the API server's clock (a running kubelet renews it every 10s), though the Node may still look Ready: check the kubelet on n2 (exit 4)"}},
		},
		state: []string{"receiver@n2: created", "sender@n1: "},
	}, {
		name: "a stopped kubelet is no matter to a helper that has started",
		cfg:  pods,
		steps: []step{
			{begin(), []string{"create receiver@n2"}},
			{created("receiver@n2"), []string{"watch kubelet n2", "show receiver@n2 scheduled"}},
			{running("receiver@n2"), []string{"unwatch kubelet n2", "follow receiver@n2"}},
			{evNodeDown{down: nodeDown{node: "n2", age: time.Minute}}, nil},
		},
		state: []string{"receiver@n2: created streaming", "sender@n1: "},
	}, {
		name: "the deadline leaves the trace incomplete",
		cfg:  pods,
		steps: []step{
			{begin(), []string{"create receiver@n2"}},
			{evDone{deadline: true}, []string{"end Incomplete: no verdict within the trace's timeout plus the helpers' start-up time"}},
			{running("receiver@n2"), nil},
		},
		state: []string{"receiver@n2: ", "sender@n1: "},
	}, {
		name: "an interrupt ends the trace with exit 3",
		cfg:  pods,
		steps: []step{
			{begin(), []string{"create receiver@n2"}},
			{evDone{}, []string{"end Incomplete: interrupted (exit 3)"}},
		},
		state: []string{"receiver@n2: ", "sender@n1: "},
	}, {
		name: "a closed pod watch says the API server went away",
		cfg:  local,
		steps: []step{
			{begin(), []string{"create sender@n1"}},
			{evPodWatchClosed{}, []string{"end Failed: pod watch closed (exit 4) (API away)"}},
		},
		state: []string{"sender@n1: "},
	}, {
		name: "a helper's output that ends without a result quotes its last words",
		cfg:  local,
		steps: []step{
			{begin(), []string{"create sender@n1"}},
			{created("sender@n1"), []string{"watch kubelet n1", "show sender@n1 scheduled"}},
			{running("sender@n1"), []string{"unwatch kubelet n1", "follow sender@n1"}},
			{streamMsg("sender@n1", lineMsg{text: "panic: boom"}), nil},
			{streamMsg("sender@n1", lineMsg{eof: io.EOF}), []string{"end Failed: helper on node n1: its output ended without a result: panic: boom (check the helper image and the node's OVS) (exit 4)"}},
		},
		state: []string{"sender@n1: created streaming ended settled"},
	}, {
		name: "a failed attach before the go fails the trace",
		cfg:  parallel,
		steps: []step{
			{begin(), []string{"create receiver@n2"}},
			{created("receiver@n2"), []string{"watch kubelet n2", "show receiver@n2 scheduled", "create sender@n1"}},
			{created("sender@n1"), []string{"watch kubelet n1", "show sender@n1 scheduled"}},
			{running("receiver@n2"), []string{"unwatch kubelet n2", "attach receiver@n2", "go receiver@n2"}},
			{streamMsg("receiver@n2", lineMsg{attachErr: errors.New("forbidden")}), []string{"end Failed: helper on node n2: cannot attach to it to start it and read its report: forbidden (the plugin needs create on pods/attach in namespace ns) (exit 4)"}},
		},
		state: []string{"receiver@n2: created streaming go", "sender@n1: created"},
	}, {
		name: "shared helpers stream at once and watch no kubelet",
		cfg:  shared,
		steps: []step{
			{begin(), []string{"create receiver@n2"}},
			{createdAs("receiver@n2", "waiting for the node's shared helper"), []string{"show receiver@n2 waiting for the node's shared helper"}},
			{line("receiver@n2", readyLine(report.RoleReceiver)), []string{"show receiver@n2 ready", "create sender@n1"}},
			{createdAs("sender@n1", ""), nil},
			{streamMsg("sender@n1", lineMsg{problem: "its output ended"}), []string{"end Failed: helper on node n1: its node's shared helper its output ended (exit 4)"}},
		},
		state: []string{"receiver@n2: created streaming ready", "sender@n1: created streaming settled"},
	}, {
		name: "a helper of another version is warned about",
		cfg:  func() machineConfig { c := local; c.version = "v1"; return c }(),
		steps: []step{
			{begin(), []string{"create sender@n1"}},
			{createdAs("sender@n1", ""), []string{"watch kubelet n1"}},
			{line("sender@n1", readyLine(report.RoleSender)), []string{"show sender@n1 ready",
				"show warning helper v-test differs from plugin v1: the report format may not match; use --helper-image with the plugin's version",
				"show injected on n1"}},
		},
		state: []string{"sender@n1: created ready"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMachine(c.cfg)
			keys := map[string]string{}
			for _, h := range m.helpers {
				keys[h.pod] = string(h.podRole) + "@" + h.node
			}
			for i, s := range c.steps {
				var got []string
				for _, e := range m.step(s.ev) {
					got = append(got, describe(e, keys))
				}
				if diff := cmp.Diff(s.want, got); diff != "" {
					t.Errorf("step %d (%T): effects (-want +got):\n%s", i, s.ev, diff)
				}
			}
			if diff := cmp.Diff(c.state, state(m, keys)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

// Once the trace has ended, the machine only notes which helpers have
// settled: they are stopped until none is left unsettled.
func TestMachineSettles(t *testing.T) {
	m := newMachine(machineConfig{trace: "tf", sender: "n1", receivers: []string{"n2"}, timeout: time.Second})
	keys := map[string]string{podOf("sender@n1"): "sender@n1", podOf("receiver@n2"): "receiver@n2"}
	for _, ev := range []event{begin(), created("receiver@n2"), running("receiver@n2"), evDone{deadline: true}} {
		m.step(ev)
	}
	unsettled := func() (out []string) {
		for _, h := range m.unsettled() {
			out = append(out, keys[h.pod])
		}
		return out
	}
	if diff := cmp.Diff([]string{"receiver@n2"}, unsettled()); diff != "" {
		t.Fatalf("unsettled (-want +got):\n%s", diff)
	}
	if effs := m.step(line("receiver@n2", readyLine(report.RoleReceiver))); effs != nil {
		t.Errorf("an ended trace asked for %v", effs)
	}
	m.step(line("receiver@n2", report.Line{Type: report.TypeCleanup, Cleanup: &report.Cleanup{Error: "busy", HardTimeout: 10}}))
	if u := unsettled(); len(u) > 0 {
		t.Errorf("still unsettled after the cleanup line: %v", u)
	}
	h := m.helpers[podOf("receiver@n2")]
	if got, want := h.leftover(""), "could not remove its flows (busy); they expire within 10s of being installed"; got != want {
		t.Errorf("leftover %q, want %q", got, want)
	}
}
