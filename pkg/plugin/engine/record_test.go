package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

type fakeCRDs struct {
	labels map[string]string
	err    error
	asked  bool
}

func (f *fakeCRDs) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	f.asked = true
	if f.err != nil {
		return nil, f.err
	}
	u := &unstructured.Unstructured{}
	u.SetName(name)
	u.SetLabels(f.labels)
	return u, nil
}

func TestCheckRecordHome(t *testing.T) {
	crdGR := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	ours := map[string]string{labels.ManagedBy: labels.Manager}
	for _, tc := range []struct {
		name   string
		crds   *fakeCRDs
		asCR   bool
		reason string
	}{
		{"our CRD: record as an object", &fakeCRDs{labels: ours}, true, ""},
		{"Antrea's CRD: keep the record in the plugin", &fakeCRDs{labels: map[string]string{"app": "antrea"}}, false, "not kubectl-traceflow's"},
		{"CRD unreadable: keep the record in the plugin", &fakeCRDs{err: apierrors.NewForbidden(crdGR, traceflow.CRDName, errors.New("no"))}, false, "get on customresourcedefinitions is not allowed"},
		{"other error", &fakeCRDs{err: errors.New("connection refused")}, false, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := CheckRecordHome(context.Background(), tc.crds, Decision{Mode: Helper, Reason: "why", RecordAsCR: true})
			if d.RecordAsCR != tc.asCR {
				t.Errorf("RecordAsCR = %v, want %v", d.RecordAsCR, tc.asCR)
			}
			if tc.reason != "" && (!strings.Contains(d.Reason, tc.reason) || !strings.Contains(d.Reason, "the record stays in the plugin")) {
				t.Errorf("reason %q does not say %q", d.Reason, tc.reason)
			}
			if tc.reason == "" && d.Reason != "why" {
				t.Errorf("reason %q changed for our CRD", d.Reason)
			}
		})
	}
	for _, d := range []Decision{{Mode: Agent}, {Mode: Helper}} {
		f := &fakeCRDs{}
		if got := CheckRecordHome(context.Background(), f, d); got != d || f.asked {
			t.Errorf("a decision without a record to write changed (%+v) or asked the API (%v)", got, f.asked)
		}
	}
}
