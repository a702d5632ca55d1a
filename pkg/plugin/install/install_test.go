package install

import (
	"bytes"
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func newDyn(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		gvrCRD: "CustomResourceDefinitionList", gvrNamespace: "NamespaceList", gvrClusterRole: "ClusterRoleList",
		gvrRole: "RoleList", gvrClusterRoleBinding: "ClusterRoleBindingList", gvrRoleBinding: "RoleBindingList",
	}, objs...)
}

func TestObjects(t *testing.T) {
	objs, err := Objects(Params{Groups: []string{"sre", "dev"}})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, o := range objs {
		refs = append(refs, o.Ref())
		if o.U.GetNamespace() == "kube-system" {
			t.Errorf("%s is in kube-system", o.Ref())
		}
	}
	want := "customresourcedefinitions.apiextensions.k8s.io/traceflows.crd.antrea.io namespaces/traceflow-system " +
		"clusterroles.rbac.authorization.k8s.io/kubectl-traceflow roles.rbac.authorization.k8s.io/kubectl-traceflow-helpers " +
		"clusterrolebindings.rbac.authorization.k8s.io/kubectl-traceflow rolebindings.rbac.authorization.k8s.io/kubectl-traceflow"
	if got := strings.Join(refs, " "); got != want {
		t.Errorf("objects:\n%s\nwant\n%s", got, want)
	}
	ns := objs[1].U
	if ns.GetLabels()[PodSecurityEnforce] != "privileged" || ns.GetLabels()[labels.ManagedBy] != labels.Manager {
		t.Errorf("namespace labels %v", ns.GetLabels())
	}
	// The ClusterRole grants no write on pods or leases anywhere.
	for _, r := range ClusterRules() {
		for _, res := range r.Resources {
			if res == "pods" || res == "leases" {
				for _, v := range r.Verbs {
					if v != "get" && v != "list" && v != "watch" {
						t.Errorf("ClusterRole grants %s %s cluster-wide", v, res)
					}
				}
			}
		}
	}
	var rb rbacv1.RoleBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[5].U.Object, &rb); err != nil {
		t.Fatal(err)
	}
	if rb.Namespace != DefaultNamespace || rb.RoleRef.Name != RoleName || len(rb.Subjects) != 2 || rb.Subjects[0].Name != "dev" || rb.Subjects[0].Kind != "Group" {
		t.Errorf("role binding %+v", rb)
	}
	none, _ := Objects(Params{})
	if len(none) != 4 {
		t.Errorf("without groups: %d objects, want 4 (no bindings)", len(none))
	}
}

func TestManifestDecodesToTheObjects(t *testing.T) {
	objs, _ := Objects(Params{Namespace: "tf", Groups: []string{"g"}})
	b, err := Manifest(objs)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != len(objs) {
		t.Fatalf("%d documents, want %d", len(docs), len(objs))
	}
	for i, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetName() != objs[i].U.GetName() || u.GetKind() == "" || (i > 0 && strings.Contains(d, "creationTimestamp")) {
			t.Errorf("document %d: %s", i, d)
		}
	}
}

func TestApplyIsIdempotentAndRemoveSparesOthers(t *testing.T) {
	ctx := context.Background()
	antreaCRD := &unstructured.Unstructured{}
	antreaCRD.SetAPIVersion("apiextensions.k8s.io/v1")
	antreaCRD.SetKind("CustomResourceDefinition")
	antreaCRD.SetName(traceflow.CRDName)
	antreaCRD.SetLabels(map[string]string{"app": "antrea"})
	dyn := newDyn(antreaCRD)
	objs, _ := Objects(Params{Groups: []string{"g"}})

	var out bytes.Buffer
	if err := Apply(ctx, dyn, objs, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "not installed by kubectl-traceflow (Antrea's?); left unchanged") ||
		!strings.Contains(out.String(), "namespaces/traceflow-system created") {
		t.Errorf("first apply:\n%s", out.String())
	}
	out.Reset()
	if err := Apply(ctx, dyn, objs, &out); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if !strings.Contains(out.String(), "roles.rbac.authorization.k8s.io/kubectl-traceflow-helpers configured") || strings.Contains(out.String(), "created") {
		t.Errorf("second apply:\n%s", out.String())
	}
	got, err := dyn.Resource(gvrRole).Namespace(DefaultNamespace).Get(ctx, RoleName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(got.Object, "rules")
	if len(rules) != len(NamespaceRules()) {
		t.Errorf("role has %d rules after two applies, want %d", len(rules), len(NamespaceRules()))
	}

	out.Reset()
	all, _ := ForRemoval(DefaultNamespace)
	if err := Remove(ctx, dyn, all, true, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gvrNamespace).Get(ctx, DefaultNamespace, metav1.GetOptions{}); err != nil {
		t.Errorf("--dry-run removed the namespace: %v", err)
	}
	if err := Remove(ctx, dyn, all, false, &out); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs[1:] {
		if _, err := resource(dyn, o).Get(ctx, o.U.GetName(), metav1.GetOptions{}); err == nil {
			t.Errorf("%s left after uninstall", o.Ref())
		}
	}
	if _, err := dyn.Resource(gvrCRD).Get(ctx, traceflow.CRDName, metav1.GetOptions{}); err != nil {
		t.Errorf("uninstall removed Antrea's CRD: %v", err)
	}
}

// An explicitly chosen existing namespace (kube-system) gets the Pod
// Security labels but is never marked ours, so uninstall leaves it.
func TestExistingNamespaceIsNeverRemoved(t *testing.T) {
	ctx := context.Background()
	ks := &unstructured.Unstructured{}
	ks.SetAPIVersion("v1")
	ks.SetKind("Namespace")
	ks.SetName("kube-system")
	ks.SetLabels(map[string]string{"kubernetes.io/metadata.name": "kube-system"})
	dyn := newDyn(ks)
	objs, _ := Objects(Params{Namespace: "kube-system"})
	if err := Apply(ctx, dyn, objs, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	got, _ := dyn.Resource(gvrNamespace).Get(ctx, "kube-system", metav1.GetOptions{})
	if got.GetLabels()[labels.ManagedBy] != "" || got.GetLabels()["kubernetes.io/metadata.name"] != "kube-system" ||
		got.GetLabels()[PodSecurityEnforce] != "privileged" {
		t.Errorf("kube-system labels after install: %v", got.GetLabels())
	}
	all, _ := ForRemoval("kube-system")
	if err := Remove(ctx, dyn, all, false, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gvrNamespace).Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
		t.Errorf("uninstall removed kube-system: %v", err)
	}
}
