package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

func TestDecide(t *testing.T) {
	rec := Health{Ready: true, Source: "AntreaAgentInfo", Age: 20 * time.Second}
	pod := Health{Ready: true, Source: "pod"}
	ctrlRec := Health{Ready: true, Source: "AntreaControllerInfo", Age: 41 * time.Second}
	stale := Health{Source: "AntreaAgentInfo", Age: 4 * time.Minute, Detail: "AntreaAgentInfo n2 is stale: last written 4m0s ago"}
	antrea := Facts{CRDServed: true, Controller: ctrlRec, Agents: map[string]Health{"n1": rec, "n2": rec}}
	byPods := Facts{CRDServed: true, Controller: pod, Agents: map[string]Health{"n1": pod, "n2": pod}}
	mixed := Facts{CRDServed: true, Controller: ctrlRec, Agents: map[string]Health{"n1": rec, "n2": pod}}
	ours := Facts{CRDServed: true, Agents: map[string]Health{}}
	// Antrea installed, its controller invisible (down, or hidden by RBAC:
	// neither record nor pod is readable).
	antreaHidden := Facts{CRDServed: true, AntreaAPIs: []string{"antreacontrollerinfos", "clusternetworkpolicies"}, Agents: map[string]Health{}}
	none := Facts{Agents: map[string]Health{}}
	oneAgentDown := Facts{CRDServed: true, Controller: pod, Agents: map[string]Health{"n1": pod}}
	oneAgentStale := Facts{CRDServed: true, Controller: ctrlRec, Agents: map[string]Health{"n1": rec, "n2": stale}}
	ctrlStale := Facts{CRDServed: true, Controller: Health{Source: "AntreaControllerInfo", Detail: "AntreaControllerInfo antrea-controller is stale"}, Agents: antrea.Agents}
	// Healthy Antrea that would not see this trace's end.
	blind := antrea
	blind.AntreaAPIs = []string{"antreacontrollerinfos"}
	blind.AgentBlind = "Service demo/empty has no ready endpoints"
	for _, tc := range []struct {
		name     string
		want     Mode
		facts    Facts
		mode     Mode
		recordCR bool
		code     exitcode.Code
		reason   string
	}{
		{"auto with Antrea's records", Auto, antrea, Agent, false, 0, "healthy by AntreaControllerInfo and AntreaAgentInfo (heartbeats at most 41s old by the API server's clock)"},
		{"auto with Antrea's pods", Auto, byPods, Agent, false, 0, "Ready by their pods"},
		{"auto with a record missing", Auto, mixed, Agent, false, 0, "by Ready pods for n2, which have no record"},
		{"auto with our CRD only", Auto, ours, Helper, true, 0, "no Ready Antrea controller"},
		{"auto without CRD", Auto, none, Helper, false, 0, "does not serve"},
		{"auto with an agent down", Auto, oneAgentDown, Helper, false, 0, "no Ready Antrea agent on n2"},
		{"auto with a stale agent record", Auto, oneAgentStale, Helper, false, 0, "no Ready Antrea agent on n2 (AntreaAgentInfo n2 is stale"},
		{"auto with a stale controller record: no CR, it may still act", Auto, ctrlStale, Helper, false, 0, "controller is not healthy: AntreaControllerInfo antrea-controller is stale; the record stays in the plugin (see -o yaml): an Antrea controller is known (AntreaControllerInfo)"},
		{"helper forced on Antrea: no CR, Antrea would act on it", Helper, antrea, Helper, false, 0, "--engine helper; the record stays in the plugin (see -o yaml): an Antrea controller is known (AntreaControllerInfo)"},
		{"auto, Antrea installed, controller hidden: no CR", Auto, antreaHidden, Helper, false, 0, "no Ready Antrea controller serves Traceflow; the record stays in the plugin (see -o yaml): Antrea is installed (crd.antrea.io serves antreacontrollerinfos)"},
		{"helper forced, Antrea installed, controller hidden: no CR", Helper, antreaHidden, Helper, false, 0, "--engine helper; the record stays in the plugin (see -o yaml): Antrea is installed"},
		{"helper forced with our CRD", Helper, ours, Helper, true, 0, ""},
		{"auto, Antrea healthy but blind to the end: helper, no CR", Auto, blind, Helper, false, 0, "Antrea is healthy, but Service demo/empty has no ready endpoints: tracing with helper pods, which see where the packet ends; the record stays in the plugin"},
		{"agent forced, Antrea blind to the end: Antrea's answer", Agent, blind, Agent, false, 0, "--engine agent"},
		{"helper forced without CRD", Helper, none, Helper, false, 0, ""},
		{"agent forced without Antrea", Agent, none, "", false, exitcode.Setup, ""},
		{"agent forced, agent down", Agent, oneAgentDown, "", false, exitcode.Setup, ""},
		{"unknown", "magic", antrea, "", false, exitcode.Usage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decide(tc.want, tc.facts, []string{"n1", "n2", "n1"})
			if tc.code != 0 {
				if exitcode.Of(err) != tc.code {
					t.Fatalf("want exit %d, got %v", tc.code, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Mode != tc.mode || d.RecordAsCR != tc.recordCR || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("got %+v", d)
			}
			// Where the record is kept in the plugin although a CRD is
			// served, the reason says so; where it is an object, it does not.
			if stays := strings.Contains(d.Reason, "the record stays in the plugin"); d.Mode == Helper && stays != (tc.facts.CRDServed && !d.RecordAsCR) {
				t.Errorf("reason %q: says the record stays in the plugin: %v, want %v", d.Reason, stays, tc.facts.CRDServed && !d.RecordAsCR)
			}
		})
	}
}

type fakeDiscovery struct {
	resources []string
	err       error
}

func (f fakeDiscovery) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	if f.err != nil {
		return nil, f.err
	}
	l := &metav1.APIResourceList{}
	for _, r := range f.resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r})
	}
	return l, nil
}

func antreaPod(name, component, node string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{"app": "antrea", "component": component}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func TestGather(t *testing.T) {
	nodes := []string{"n1", "n2"}
	cs := fake.NewClientset(
		antreaPod("antrea-controller-1", "antrea-controller", "n1", true),
		antreaPod("antrea-agent-a", "antrea-agent", "n1", true),
		antreaPod("antrea-agent-b", "antrea-agent", "n2", false),
	)
	f, err := Gather(context.Background(), Sources{Discovery: fakeDiscovery{resources: []string{"traceflows"}}, Pods: cs.CoreV1().Pods("")}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if !f.CRDServed || !f.Controller.Ready || !f.Agents["n1"].Ready || f.Agents["n2"].Ready || f.Agents["n1"].Source != "pod" || len(f.AntreaAPIs) != 0 {
		t.Fatalf("facts %+v", f)
	}
	// Antrea's other APIs say Antrea is installed; subresources are no APIs.
	f, err = Gather(context.Background(), Sources{Discovery: fakeDiscovery{resources: []string{"traceflows", "traceflows/status", "clusternetworkpolicies", "antreacontrollerinfos"}}, Pods: cs.CoreV1().Pods("")}, nodes)
	if err != nil || !slices.Equal(f.AntreaAPIs, []string{"antreacontrollerinfos", "clusternetworkpolicies"}) {
		t.Fatalf("Antrea's APIs %v (%v), want antreacontrollerinfos and clusternetworkpolicies", f.AntreaAPIs, err)
	}

	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "crd.antrea.io"}, "v1beta1")
	f, err = Gather(context.Background(), Sources{Discovery: fakeDiscovery{err: notFound}, Pods: cs.CoreV1().Pods("")}, nodes)
	if err != nil || f.CRDServed || f.Controller.Ready {
		t.Fatalf("without the CRD: %+v %v", f, err)
	}

	if _, err = Gather(context.Background(), Sources{Discovery: fakeDiscovery{err: errors.New("connection refused")}, Pods: cs.CoreV1().Pods("")}, nodes); exitcode.Of(err) != exitcode.Setup {
		t.Fatalf("API unreachable must be a setup failure, got %v", err)
	}

	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("rbac"))
	})
	f, err = Gather(context.Background(), Sources{Discovery: fakeDiscovery{resources: []string{"traceflows"}}, Pods: cs.CoreV1().Pods("")}, nodes)
	if err != nil || f.Controller.Ready {
		t.Fatalf("forbidden pod list must mean 'cannot prove Antrea', got %+v %v", f, err)
	}
}

type hungDiscovery struct{ release chan struct{} }

func (h hungDiscovery) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	<-h.release
	return nil, errors.New("too late")
}

// A hung API server does not hold up Ctrl-C: Gather returns when its
// context ends, with the context's error, while the discovery call is
// still hung (it is released only when the test ends), so no clock is
// needed to tell that it did not wait for the server.
func TestGatherHonoursTheContext(t *testing.T) {
	h := hungDiscovery{release: make(chan struct{})}
	defer close(h.release)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Gather(ctx, Sources{Discovery: h}, nil)
		done <- err
	}()
	cancel() // Ctrl-C
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Gather with a hung discovery after Ctrl-C: %v, want the context's error", err)
		}
	case <-time.After(time.Minute): // ends the wait only: Gather hangs with the discovery
		t.Fatal("Gather did not return after its context ended: it waits for a hung API server")
	}
}
