package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func TestInstallCRDDryRunPrintsTheManifest(t *testing.T) {
	res := runCommand(t, []string{"install-crd", "--dry-run"})
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.stdout != string(traceflow.CRDManifest()) {
		t.Error("install-crd --dry-run did not print the embedded manifest")
	}
	if res.connected {
		t.Error("install-crd --dry-run asked for cluster clients")
	}
}

func existingCRD(labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName(traceflow.CRDName)
	u.SetLabels(labels)
	u.SetResourceVersion("7")
	return u
}

func TestInstallCRD(t *testing.T) {
	tests := []struct {
		name      string
		existing  []runtime.Object
		reactor   error
		wantVerbs []string
		wantOut   string
		wantCode  exitcode.Code
	}{
		{name: "creates", wantVerbs: []string{"get", "create"}, wantOut: "traceflows.crd.antrea.io created"},
		{name: "updates its own", existing: []runtime.Object{existingCRD(map[string]string{labels.ManagedBy: labels.Manager})},
			wantVerbs: []string{"get", "update"}, wantOut: "traceflows.crd.antrea.io configured"},
		{name: "leaves Antrea's alone", existing: []runtime.Object{existingCRD(map[string]string{"app": "antrea"})},
			wantVerbs: []string{"get"}, wantOut: "not installed by kubectl-traceflow (Antrea's?); left unchanged"},
		{name: "forbidden", reactor: apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, traceflow.CRDName, errors.New("RBAC")),
			wantVerbs: []string{"get"}, wantCode: exitcode.Setup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{traceflow.CRDsResource: "CustomResourceDefinitionList"}, tt.existing...)
			if tt.reactor != nil {
				dyn.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tt.reactor })
			}
			var out bytes.Buffer
			o := &InstallCRDOptions{IOStreams: genericiooptions.IOStreams{Out: &out}}
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			err := install.CRD(context.Background(), dyn.Resource(traceflow.CRDsResource), o.crd, o.Out)
			if code := exitcode.Of(err); code != tt.wantCode {
				t.Fatalf("exit code %d (%v), want %d", code, err, tt.wantCode)
			}
			if tt.wantCode == exitcode.Setup && !strings.Contains(err.Error(), "cluster-admin") {
				t.Errorf("error %q does not say what rights are needed", err)
			}
			var verbs []string
			for _, a := range dyn.Actions() {
				verbs = append(verbs, a.GetVerb())
			}
			if diff := cmp.Diff(tt.wantVerbs, verbs); diff != "" {
				t.Errorf("API calls (-want +got):\n%s", diff)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("output %q lacks %q", out.String(), tt.wantOut)
			}
			if tt.name == "creates" {
				got, err := dyn.Resource(traceflow.CRDsResource).Get(context.Background(), traceflow.CRDName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.GetLabels()[labels.ManagedBy] != labels.Manager {
					t.Error("the created CRD does not carry the managed-by label that later updates rely on")
				}
			}
		})
	}
}
