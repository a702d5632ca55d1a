package helpermode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

type harness struct {
	cluster *fakeCluster
	cs      *fake.Clientset
	records *fakeRecords
	mu      sync.Mutex
	updates []outcome.Update
	runner  *Runner
}

func newHarness(script func(f *fakeCluster, p *corev1.Pod)) *harness {
	h := &harness{cluster: newFakeCluster(script), cs: fake.NewClientset(), records: &fakeRecords{objects: map[string]*traceflow.Traceflow{}}}
	h.runner = &Runner{
		Cluster: h.cluster,
		Tags: &tagalloc.Allocator{Leases: h.cs.CoordinationV1().Leases("kube-system"),
			ServerNow: func(context.Context) (time.Time, error) { return time.Now(), nil }},
		Records: h.records,
		Now:     time.Now,
		Version: "v-test",
		Emit: func(u outcome.Update) {
			h.mu.Lock()
			h.updates = append(h.updates, u)
			h.mu.Unlock()
		},
	}
	return h
}

func (h *harness) leases(t *testing.T) int {
	l, err := h.cs.CoordinationV1().Leases("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

func cfg() Config {
	return Config{Namespace: "kube-system", Image: "helper:test", Timeout: 5 * time.Second}
}

func plan(receivers ...string) Plan {
	return Plan{
		Trace: "tf-a-b-xyz", Sender: "n1", Receivers: receivers,
		SenderArgs: report.ProbeArgs{SourcePod: "default/pod-a", Destination: "10.244.2.5", TCP: 80},
		View:       outcome.TraceStarted{Name: "tf-a-b-xyz", Engine: "helper", Source: "default/pod-a", Destination: "default/pod-b"},
		Record:     &traceflow.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "tf-a-b-xyz"}},
		RecordAsCR: true,
	}
}

var (
	fwdTunnel = report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded, TunnelDstIP: "192.168.77.12"}
	spoof     = report.Observation{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded}
	received  = report.Observation{Component: report.ComponentForwarding, Action: report.ActionReceived}
	delivered = report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionDelivered, Pod: "default/pod-b"}
	dropped   = report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "IngressDefaultRule", Action: report.ActionDropped, NetworkPolicy: "default/deny"}
)

// interNode is a two-node trace: the receiver reports the packet only after
// the sender injected it, and the sender must not exist before the
// receiver said ready.
func interNode(t *testing.T) func(f *fakeCluster, p *corev1.Pod) {
	var receiverReady atomic.Bool
	injected := make(chan struct{})
	return func(f *fakeCluster, p *corev1.Pod) {
		f.run(p)
		switch p.Labels[labels.Role] {
		case string(helperpod.RoleReceiver):
			// Set before the write returns: the runner can act on the line
			// before this goroutine runs again.
			receiverReady.Store(true)
			f.write(p, readyLine(report.RoleReceiver))
			<-injected
			f.write(p, obsLine(received, 0, "Classifier", "priority=200,in_port=tun0"),
				obsLine(delivered, 12, "Output", "priority=200,reg1=0x4"),
				resultLine("n2", report.RoleReceiver, 0, received, delivered))
			f.end(p)
		case string(helperpod.RoleSender):
			f.waitGo(p) // a sender started in parallel injects only on go
			if !receiverReady.Load() {
				t.Error("sender injecting before the receiver was ready")
			}
			f.write(p, readyLine(report.RoleSender))
			close(injected)
			f.write(p, obsLine(spoof, 2, "SpoofGuard", "priority=200,ip"), obsLine(fwdTunnel, 7, "L3Forwarding", "priority=200,ip,nw_dst=10.244.2.0/24"),
				resultLine("n1", report.RoleSender, 0, spoof, fwdTunnel))
			f.end(p)
		}
	}
}

func TestInterNodeDelivered(t *testing.T) {
	h := newHarness(interNode(t))
	out, err := h.runner.Run(context.Background(), cfg(), plan("n2"))
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdict != outcome.Delivered {
		t.Fatalf("verdict %s (%s)", out.Verdict, out.Reason)
	}
	if got := strings.Join(h.cluster.createdNames(), ","); got != "receiver@n2,sender@n1" {
		t.Errorf("pods created %s, want the receiver first", got)
	}
	if len(out.Results) != 2 || out.Results[0].Node != "n1" || out.Results[0].Role != report.RoleSender ||
		out.Results[1].Node != "n2" || len(out.Results[1].Observations) != 2 || out.Results[1].Observations[0].Action != report.ActionReceived {
		t.Errorf("merged results %+v", out.Results)
	}
	if out.Record.Status.Phase != traceflow.PhaseSucceeded || out.Record.Status.DataplaneTag != int8(out.Tag) {
		t.Errorf("record status %+v", out.Record.Status)
	}
	if len(h.cluster.deleted) != 1 {
		t.Errorf("helper pods not deleted: %v", h.cluster.deleted)
	}
	if n := h.leases(t); n != 0 {
		t.Errorf("%d tag claims left", n)
	}
	if len(h.records.objects) != 0 {
		t.Errorf("record left without --keep: %v", h.records.objects)
	}
	// Writes may coalesce, but none may lose an observation a previous one had.
	prev := -1
	for i, n := range h.records.observations {
		if n < prev {
			t.Errorf("status write %d has %d observations, fewer than the %d before", i, n, prev)
		}
		prev = n
	}
	if prev != 4 {
		t.Errorf("last status write has %d observations, want 4", prev)
	}
}

func TestKeepLeavesTheRecordWithMergedStatus(t *testing.T) {
	h := newHarness(interNode(t))
	c := cfg()
	c.Keep = true
	if _, err := h.runner.Run(context.Background(), c, plan("n2")); err != nil {
		t.Fatal(err)
	}
	tf := h.records.objects["tf-a-b-xyz"]
	if tf == nil || tf.Status.Phase != traceflow.PhaseSucceeded || len(tf.Status.Results) != 2 {
		t.Fatalf("kept record %+v", tf)
	}
}

// The Traceflow object never holds a state Antrea acts on: no stored
// status carries a dataplaneTag (Antrea's agents trace whatever is Running
// with a tag), the first status write makes it Running (Antrea's controller
// would tag an object without a phase), and the tag is in an annotation.
// The record the plugin returns still has the tag in its status.
func TestRecordNeverHoldsAStateAntreaActsOn(t *testing.T) {
	h := newHarness(interNode(t))
	c := cfg()
	c.Keep = true
	out, err := h.runner.Run(context.Background(), c, plan("n2"))
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("verdict %s, err %v", out.Verdict, err)
	}
	h.records.mu.Lock()
	stored := h.records.stored
	h.records.mu.Unlock()
	if len(stored) < 3 {
		t.Fatalf("%d stored states, want the create, a Running write and the final one", len(stored))
	}
	want := fmt.Sprint(out.Tag)
	for i, tf := range stored {
		if tf.Status.DataplaneTag != 0 {
			t.Errorf("stored state %d: status.dataplaneTag %d (phase %q): Antrea's agents would trace it", i, tf.Status.DataplaneTag, tf.Status.Phase)
		}
		if tf.Annotations[labels.TagAnnotation] != want {
			t.Errorf("stored state %d: annotation %s = %q, want %s", i, labels.TagAnnotation, tf.Annotations[labels.TagAnnotation], want)
		}
		if i > 0 && tf.Status.Phase == "" {
			t.Errorf("stored state %d has no phase after the first status write", i)
		}
	}
	if p := stored[1].Status.Phase; p != traceflow.PhaseRunning || stored[1].Status.StartTime == nil {
		t.Errorf("first status write: phase %q start %v, want Running with a start time", p, stored[1].Status.StartTime)
	}
	if p := stored[len(stored)-1].Status.Phase; p != traceflow.PhaseSucceeded {
		t.Errorf("last stored phase %q, want Succeeded", p)
	}
	if out.Record == nil || out.Record.Status.DataplaneTag != int8(out.Tag) || out.Tag == 0 {
		t.Errorf("returned record's tag %v, want %d", out.Record, out.Tag)
	}
}

func TestIntraNodeDrop(t *testing.T) {
	h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
		f.run(p)
		f.write(p, readyLine(report.RoleSender), obsLine(spoof, 2, "SpoofGuard", "x"),
			obsLine(dropped, 10, "IngressDefaultRule", "priority=200,ip,reg1=0x4 actions=drop"))
		// The helper would go on to print its result; the verdict must not wait for it.
	})
	out, err := h.runner.Run(context.Background(), cfg(), plan())
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdict != outcome.Dropped || !strings.Contains(out.Reason, "IngressDefaultRule") || !strings.Contains(out.Reason, "default/deny") {
		t.Fatalf("verdict %s reason %q", out.Verdict, out.Reason)
	}
}

func TestSenderNeverSawItsProbe(t *testing.T) {
	h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
		f.run(p)
		f.write(p, readyLine(report.RoleSender), resultLine("n1", report.RoleSender, 3))
		f.end(p)
	})
	out, err := h.runner.Run(context.Background(), cfg(), plan())
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdict != outcome.Incomplete || out.Record.Status.Phase != traceflow.PhaseFailed {
		t.Fatalf("verdict %s phase %s", out.Verdict, out.Record.Status.Phase)
	}
	if code, _ := outcome.ExitCode(out.Verdict, outcome.ExpectDelivered, outcome.DestinationPod); code != exitcode.Timeout {
		t.Fatalf("exit %d", code)
	}
}

// A helper that knows why it could not complete the trace (its exit 3
// with a summary: a packet the pipeline's agent holds) is quoted in the
// verdict's reason.
func TestIncompleteQuotesTheHelper(t *testing.T) {
	held := resultLine("n1", report.RoleSender, 3, spoof)
	held.Explanation = &report.Explanation{Summary: "handed to ovn-controller by lr_in_arp_request (GR_n1), which holds it until it knows the next hop's MAC"}
	h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
		f.run(p)
		f.write(p, readyLine(report.RoleSender), obsLine(spoof, 2, "SpoofGuard", "x"), held)
		f.end(p)
	})
	out, err := h.runner.Run(context.Background(), cfg(), plan())
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdict != outcome.Incomplete || !strings.Contains(out.Reason, "the helper on n1 says: handed to ovn-controller") {
		t.Fatalf("verdict %s reason %q: want Incomplete quoting the helper", out.Verdict, out.Reason)
	}
}

func TestStartFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(f *fakeCluster, p *corev1.Pod)
		want   string
	}{
		{"image pull", func(f *fakeCluster, p *corev1.Pod) {
			f.event(p, "Pulling", "pulling image")
			f.setState(p, corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}})
		}, "(ErrImagePull: not found); to build and push one yourself: docker build -f images/helper/Dockerfile"},
		{"image pull failed, said by the event first", func(f *fakeCluster, p *corev1.Pod) {
			f.event(p, "Failed", `Failed to pull image "helper:test": failed to resolve reference: dial tcp: lookup ghcr.io: network is unreachable`)
		}, "cannot pull the helper image helper:test: check --helper-image and that the node can reach its registry (Failed to pull image"},
		{"image pull failed, hint after the event", func(f *fakeCluster, p *corev1.Pod) {
			f.event(p, "Failed", `Failed to pull image "helper:test": not found`)
		}, "; to build and push one yourself: docker build"},
		{"helper error as the pod's termination message", func(f *fakeCluster, p *corev1.Pod) {
			f.setState(p, corev1.PodFailed, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
				Message: `{"v":1,"type":"error","error":{"code":"setup","message":"no ovs-vswitchd control socket in /var/run/openvswitch"}}`}})
		}, "helper pod failed: no ovs-vswitchd control socket in /var/run/openvswitch"},
		{"no OVS on the node", func(f *fakeCluster, p *corev1.Pod) {
			f.event(p, "FailedMount", `MountVolume.SetUp failed for volume "ovs-run" : hostPath type check failed: /var/run/openvswitch is not a directory`)
		}, "no Open vSwitch run directory"},
		{"helper error line", func(f *fakeCluster, p *corev1.Pod) {
			f.run(p)
			f.write(p, report.Line{Type: report.TypeError, Error: &report.Error{Code: report.ErrorSetup, Message: "connect to br-int.mgmt: no such file"}})
		}, "connect to br-int.mgmt"},
		{"helper crash", func(f *fakeCluster, p *corev1.Pod) {
			f.run(p)
			f.write(p, "panic: runtime error: index out of range")
			f.end(p)
		}, "panic: runtime error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(tc.script)
			out, err := h.runner.Run(context.Background(), cfg(), plan())
			if exitcode.Of(err) != exitcode.Setup || out.Verdict != outcome.Failed {
				t.Fatalf("want a setup failure, got %v (%s)", err, out.Verdict)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "node n1") {
				t.Errorf("message %q does not name the node and %q", err, tc.want)
			}
			if len(h.cluster.deleted) != 1 || h.leases(t) != 0 || len(h.records.objects) != 0 {
				t.Errorf("left behind: deleted=%v leases=%d records=%d", h.cluster.deleted, h.leases(t), len(h.records.objects))
			}
		})
	}
}

func TestInterruptCleansUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
		f.run(p)
		f.write(p, readyLine(report.RoleReceiver))
		cancel() // Ctrl-C while the trace runs
	})
	out, err := h.runner.Run(ctx, cfg(), plan("n2"))
	if exitcode.Of(err) != exitcode.Timeout || out.Verdict != outcome.Incomplete {
		t.Fatalf("interrupted trace: %v %s", err, out.Verdict)
	}
	if len(h.cluster.deleted) != 1 || h.leases(t) != 0 || len(h.records.objects) != 0 {
		t.Errorf("left behind after interrupt: deleted=%v leases=%d records=%d", h.cluster.deleted, h.leases(t), len(h.records.objects))
	}
}

func TestUpdatesReachTheView(t *testing.T) {
	h := newHarness(interNode(t))
	if _, err := h.runner.Run(context.Background(), cfg(), plan("n2")); err != nil {
		t.Fatal(err)
	}
	m := &outcome.Model{}
	for _, u := range h.updates {
		m.Apply(u)
	}
	if len(m.Nodes) != 2 || m.Nodes[0].Name != "n1" || len(m.AllHops()) != 4 || m.Finished == nil || m.Finished.Verdict != outcome.Delivered || m.InjectedAt.IsZero() {
		t.Fatalf("view model after the trace: nodes=%d hops=%d finished=%+v", len(m.Nodes), len(m.AllHops()), m.Finished)
	}
}

func TestVersionMismatchWarns(t *testing.T) {
	h := newHarness(interNode(t))
	h.runner.Version = "v-plugin"
	if _, err := h.runner.Run(context.Background(), cfg(), plan("n2")); err != nil {
		t.Fatal(err)
	}
	warned := 0
	for _, u := range h.updates {
		if w, ok := u.(outcome.Warning); ok && strings.Contains(w.Message, "v-test differs from plugin v-plugin") {
			warned++
		}
	}
	if warned != 2 {
		t.Fatalf("want a warning per helper (2), got %d", warned)
	}
}

func TestParallelStartSaysGoWhenReceiversAreReady(t *testing.T) {
	h := newHarness(interNode(t))
	c := cfg()
	c.ParallelStart = true
	out, err := h.runner.Run(context.Background(), c, plan("n2"))
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("%s %v", out.Verdict, err)
	}
	// Both pods exist from the start; each waited for its go, and its
	// report came through the attach, not its log.
	if got := strings.Join(h.cluster.createdNames(), ","); got != "receiver@n2,sender@n1" {
		t.Errorf("pods created %s", got)
	}
	h.cluster.mu.Lock()
	defer h.cluster.mu.Unlock()
	for _, p := range h.cluster.created {
		if !p.Spec.Containers[0].Stdin || !slices.Contains(p.Spec.Containers[0].Args, "--start-on-stdin") || !h.cluster.attached[p.Name] {
			t.Errorf("%s: stdin %v, args %v, attached %v", p.Name, p.Spec.Containers[0].Stdin, p.Spec.Containers[0].Args, h.cluster.attached[p.Name])
		}
	}
	if h.cluster.goes != 2 {
		t.Errorf("%d go lines, want one for each helper", h.cluster.goes)
	}
}

func TestParallelStartAttachRefused(t *testing.T) {
	h := newHarness(interNode(t))
	h.cluster.attachErr = errors.New("pods/attach is forbidden")
	c := cfg()
	c.ParallelStart = true
	_, err := h.runner.Run(context.Background(), c, plan("n2"))
	if exitcode.Of(err) != exitcode.Setup || !strings.Contains(err.Error(), "pods/attach") {
		t.Fatalf("want a setup failure naming pods/attach, got %v", err)
	}
	if len(h.cluster.deleted) != 1 || h.leases(t) != 0 {
		t.Errorf("left behind: deleted=%v leases=%d", h.cluster.deleted, h.leases(t))
	}
}

// An intra-node trace has no receiver to wait for: its sender gets its go
// the moment it is attached to, and its report comes through the attach.
func TestIntraNodeGoesAtOnce(t *testing.T) {
	h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
		f.run(p)
		f.waitGo(p)
		f.write(p, readyLine(report.RoleSender), obsLine(delivered, 12, "Output", "x"))
	})
	c := cfg()
	c.ParallelStart = true
	if out, err := h.runner.Run(context.Background(), c, plan()); err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("%s %v", out.Verdict, err)
	}
	h.cluster.mu.Lock()
	defer h.cluster.mu.Unlock()
	if h.cluster.goes != 1 || len(h.cluster.attached) != 1 {
		t.Errorf("%d go lines, %d pods attached to; want 1 and 1", h.cluster.goes, len(h.cluster.attached))
	}
}

// The kubelet's Started event comes before the pod's status says Running
// (by a second or more in a real kubelet); the log is followed from it.
func TestStartedEventStartsTheLogAtOnce(t *testing.T) {
	h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
		f.setState(p, corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}})
		f.event(p, "Started", "Started container helper")
		f.mu.Lock()
		opened := f.opened[p.Name]
		f.mu.Unlock()
		<-opened // no Running status ever arrives
		f.write(p, readyLine(report.RoleSender), obsLine(delivered, 12, "Output", "x"))
	})
	if out, err := h.runner.Run(context.Background(), cfg(), plan()); err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("%s %v", out.Verdict, err)
	}
}

// A pod destination that the sender's node routes through its gateway: the
// sender's own report ends ForwardedOutOfNetwork, but the packet arrives on
// the destination's node, whose receiver catches it on its gateway port.
// The trace waits for that receiver and ends Delivered; without an arrival
// it ends with the sender's ForwardedOutOfNetwork.
func TestGatewayRoutedDestinationWaitsForItsNode(t *testing.T) {
	outOfNetwork := report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionForwardedOutOfNetwork}
	for name, arrives := range map[string]bool{"arrives": true, "never arrives": false} {
		t.Run(name, func(t *testing.T) {
			var receiverReady atomic.Bool
			injected := make(chan struct{})
			h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
				f.run(p)
				switch p.Labels[labels.Role] {
				case string(helperpod.RoleReceiver):
					receiverReady.Store(true)
					f.write(p, readyLine(report.RoleReceiver))
					<-injected
					if arrives {
						f.write(p, obsLine(received, 0, "Classifier", "priority=200,in_port=gw0"),
							obsLine(delivered, 12, "Output", "priority=200,reg1=0x4"),
							resultLine("n2", report.RoleReceiver, 0, received, delivered))
					} else {
						f.write(p, resultLine("n2", report.RoleReceiver, 3))
					}
					f.end(p)
				case string(helperpod.RoleSender):
					f.waitGo(p)
					f.write(p, readyLine(report.RoleSender))
					close(injected)
					f.write(p, obsLine(spoof, 2, "SpoofGuard", "priority=200,ip"), obsLine(outOfNetwork, 20, "Output", "priority=200,reg1=0x2"),
						resultLine("n1", report.RoleSender, 0, spoof, outOfNetwork))
					f.end(p)
				}
			})
			pl := plan("n2")
			pl.View.DestinationKind = outcome.DestinationPod
			out, err := h.runner.Run(context.Background(), cfg(), pl)
			if err != nil {
				t.Fatal(err)
			}
			want := outcome.ForwardedOutOfNetwork
			if arrives {
				want = outcome.Delivered
			}
			if out.Verdict != want {
				t.Fatalf("verdict %s (%s), want %s", out.Verdict, out.Reason, want)
			}
			if code, _ := outcome.ExitCode(out.Verdict, outcome.ExpectDelivered, outcome.DestinationPod); (code == 0) != arrives {
				t.Errorf("exit code %d with --expect delivered", code)
			}
		})
	}
}

// A helper that cannot read the pipeline's own names (OVN's southbound
// database out of reach) says why in its ready line; the view shows it.
func TestNamingNoteWarns(t *testing.T) {
	const why = "OVN programs this bridge, but its southbound database cannot be read"
	h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
		f.run(p)
		l := readyLine(report.RoleSender)
		l.Ready.Naming = why
		f.write(p, l, obsLine(delivered, 12, "", "priority=200,reg1=0x4"), resultLine("n1", report.RoleSender, 0, delivered))
		f.end(p)
	})
	if _, err := h.runner.Run(context.Background(), cfg(), plan()); err != nil {
		t.Fatal(err)
	}
	warned := 0
	for _, u := range h.updates {
		if w, ok := u.(outcome.Warning); ok && w.Message == why {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("want one warning with the helper's naming note, got %d", warned)
	}
}

// Someone else writes the record while the trace runs (a label, a
// controller): each status write that conflicts is redone on a fresh read,
// and the kept record ends Succeeded with every result and their label.
func TestRecorderRetriesConflictsOnAFreshRead(t *testing.T) {
	h := newHarness(interNode(t))
	n := 0
	h.records.meddle = func(cur *traceflow.Traceflow) {
		n++
		if n%2 == 1 { // every other write meets a change made meanwhile
			cur.Labels = map[string]string{"touched": fmt.Sprint(n)}
			cur.ResourceVersion = fmt.Sprintf("other-%d", n)
		}
	}
	c := cfg()
	c.Keep = true
	out, err := h.runner.Run(context.Background(), c, plan("n2"))
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("verdict %s, err %v; want Delivered and no error", out.Verdict, err)
	}
	tf := h.records.objects["tf-a-b-xyz"]
	if tf == nil || tf.Status.Phase != traceflow.PhaseSucceeded || len(tf.Status.Results) != 2 || tf.Labels["touched"] == "" {
		t.Fatalf("kept record %+v", tf)
	}
}

// A record that cannot be written is a warning; the verdict's exit code
// stands.
func TestRecordWriteFailureIsAWarning(t *testing.T) {
	h := newHarness(interNode(t))
	h.records.failStatus = apierrors.NewForbidden(schema.GroupResource{Group: traceflow.Group, Resource: "traceflows/status"}, "tf-a-b-xyz", errors.New("RBAC"))
	out, err := h.runner.Run(context.Background(), cfg(), plan("n2"))
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("verdict %s, err %v; want Delivered and no error", out.Verdict, err)
	}
	var warned bool
	for _, u := range h.updates {
		if w, ok := u.(outcome.Warning); ok && strings.Contains(w.Message, "not allowed to create traceflows") || ok && strings.Contains(w.Message, "not allowed to update traceflows/status") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning about the record among %v", h.updates)
	}
	if len(h.records.objects) != 0 {
		t.Errorf("record left: %v", h.records.objects)
	}
}

// An interrupt that comes while the record is being created: the API
// server may create it all the same, so the create is carried through and
// the record deleted; a create cut short would leave a record the trace
// does not know it made.
func TestInterruptDuringRecordCreateLeavesNoRecord(t *testing.T) {
	h := newHarness(interNode(t))
	ctx, cancel := context.WithCancel(context.Background())
	h.records.onCreate = cancel
	out, err := h.runner.Run(ctx, cfg(), plan("n2"))
	if exitcode.Of(err) != exitcode.Timeout {
		t.Errorf("interrupted trace: %s %v", out.Verdict, err)
	}
	h.records.mu.Lock()
	defer h.records.mu.Unlock()
	if len(h.records.stored) != 1 || len(h.records.objects) != 0 {
		t.Errorf("records created %d, left %v", len(h.records.stored), h.records.objects)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, u := range h.updates {
		if w, ok := u.(outcome.Warning); ok {
			t.Errorf("warning: %s", w.Message)
		}
	}
}
