package traceflow

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

func newFakeClient() (*dynamicfake.FakeDynamicClient, Client) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{GroupVersionResource: ListKind})
	return dyn, NewClient(dyn, nil)
}

func sample() *Traceflow {
	return Build(Request{
		Name: "pod-a-to-pod-b-abcde", Source: Source{Namespace: "default", Pod: "pod-a"},
		Destination: Destination{Namespace: "default", Pod: "pod-b"},
		Protocol:    TCP, DstPort: 80, TCPFlags: TCPFlagSYN, TTL: 64, Timeout: 20 * time.Second,
	})
}

func TestClientRoundTrip(t *testing.T) {
	ctx := context.Background()
	dyn, c := newFakeClient()
	tf := sample()

	created, err := c.Create(ctx, tf)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if diff := cmp.Diff(tf, created); diff != "" {
		t.Errorf("Create returned a different object (-want +got):\n%s", diff)
	}

	created.Status = Status{Phase: PhaseSucceeded, DataplaneTag: 7, Results: []report.NodeResult{{
		Node: "node-1", Role: report.RoleSender, Timestamp: 1700000000,
		Observations: []report.Observation{{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded}},
	}}}
	if _, err := c.UpdateStatus(ctx, created); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	got, err := c.Get(ctx, tf.Name)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("Get after UpdateStatus (-want +got):\n%s", diff)
	}

	w, err := c.Watch(ctx, tf.Name, "")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()
	if err := c.Delete(ctx, tf.Name); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	// The fake, like a real server without a resourceVersion, may first
	// replay the object as ADDED.
	var ev watch.Event
	for ev.Type != watch.Deleted {
		select {
		case ev = <-w.ResultChan():
		case <-time.After(5 * time.Second):
			t.Fatal("no DELETED event from the watch")
		}
	}
	if dec, err := FromObject(ev.Object); err != nil || dec.Name != tf.Name {
		t.Errorf("FromObject(deleted event) = %v, %v", dec, err)
	}

	var verbs []string
	for _, a := range dyn.Actions() {
		verbs = append(verbs, a.GetVerb()+"/"+a.GetSubresource())
	}
	want := []string{"create/", "update/status", "get/", "watch/", "delete/"}
	if diff := cmp.Diff(want, verbs); diff != "" {
		t.Errorf("API calls (-want +got):\n%s", diff)
	}
}

func TestFromUnstructuredRejectsOtherKinds(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "x"},
	}}
	if _, err := FromUnstructured(u); err == nil {
		t.Fatal("FromUnstructured(Pod) succeeded")
	}
	if _, err := FromObject(&runtime.Unknown{}); err == nil {
		t.Fatal("FromObject(Unknown) succeeded")
	}
}

// TestOlderAntreaActionsDecode checks that a status written by Antrea before
// v1.12 (ForwardedOutOfOverlay) decodes, and normalizes to the newer name.
func TestOlderAntreaActionsDecode(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion, "kind": Kind, "metadata": map[string]any{"name": "old"},
		"status": map[string]any{"phase": "Succeeded", "results": []any{map[string]any{
			"node": "n1", "role": "Sender",
			"observations": []any{map[string]any{"component": "Forwarding", "action": "ForwardedOutOfOverlay"}},
		}}},
	}}
	tf, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if got := tf.Status.Results[0].Observations[0].Action.Normalize(); got != report.ActionForwardedOutOfNetwork {
		t.Errorf("normalized action = %s", got)
	}
}
