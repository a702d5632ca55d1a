package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

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
	antrea := Facts{CRDServed: true, ControllerReady: true, AgentReady: map[string]bool{"n1": true, "n2": true}}
	ours := Facts{CRDServed: true, AgentReady: map[string]bool{}}
	none := Facts{AgentReady: map[string]bool{}}
	oneAgentDown := Facts{CRDServed: true, ControllerReady: true, AgentReady: map[string]bool{"n1": true}}
	for _, tc := range []struct {
		name     string
		want     Mode
		facts    Facts
		mode     Mode
		recordCR bool
		code     exitcode.Code
		reason   string
	}{
		{"auto with Antrea", Auto, antrea, Agent, false, 0, "Ready"},
		{"auto with our CRD only", Auto, ours, Helper, true, 0, "no Ready Antrea controller"},
		{"auto without CRD", Auto, none, Helper, false, 0, "does not serve"},
		{"auto with an agent down", Auto, oneAgentDown, Helper, false, 0, "no Ready Antrea agent on n2"},
		{"helper forced on Antrea: no CR, Antrea would act on it", Helper, antrea, Helper, false, 0, "--engine helper"},
		{"helper forced with our CRD", Helper, ours, Helper, true, 0, ""},
		{"agent forced without Antrea", Agent, none, "", false, exitcode.Setup, ""},
		{"agent forced, agent down", Agent, oneAgentDown, "", false, exitcode.Setup, ""},
		{"unknown", "magic", antrea, "", false, exitcode.Usage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decide(tc.want, tc.facts, []string{"n1", "n2"})
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
	cs := fake.NewClientset(
		antreaPod("antrea-controller-1", "antrea-controller", "n1", true),
		antreaPod("antrea-agent-a", "antrea-agent", "n1", true),
		antreaPod("antrea-agent-b", "antrea-agent", "n2", false),
	)
	f, err := Gather(context.Background(), fakeDiscovery{resources: []string{"traceflows"}}, cs.CoreV1().Pods(""))
	if err != nil {
		t.Fatal(err)
	}
	if !f.CRDServed || !f.ControllerReady || !f.AgentReady["n1"] || f.AgentReady["n2"] {
		t.Fatalf("facts %+v", f)
	}

	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "crd.antrea.io"}, "v1beta1")
	f, err = Gather(context.Background(), fakeDiscovery{err: notFound}, cs.CoreV1().Pods(""))
	if err != nil || f.CRDServed || f.ControllerReady {
		t.Fatalf("without the CRD: %+v %v", f, err)
	}

	if _, err = Gather(context.Background(), fakeDiscovery{err: errors.New("connection refused")}, cs.CoreV1().Pods("")); exitcode.Of(err) != exitcode.Setup {
		t.Fatalf("API unreachable must be a setup failure, got %v", err)
	}

	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("rbac"))
	})
	f, err = Gather(context.Background(), fakeDiscovery{resources: []string{"traceflows"}}, cs.CoreV1().Pods(""))
	if err != nil || f.ControllerReady {
		t.Fatalf("forbidden pod list must mean 'cannot prove Antrea', got %+v %v", f, err)
	}
}
