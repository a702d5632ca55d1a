// Package install builds and applies what a cluster needs once, by an
// administrator, before anyone traces in helper mode: the Traceflow CRD
// (where nobody else installed one), a namespace of our own for the helper
// pods and tag claims, allowed to run privileged pods and nothing else is,
// a ClusterRole with what every user of the plugin needs to read, and a Role
// in that namespace for what helper mode writes. Building is pure (Objects);
// Apply and Remove talk to the cluster. Cleanup takes out what interrupted
// traces left there, so that everything the plugin puts into a cluster or
// takes out of it goes through this package.
//
// Why a namespace of our own: creating pods in kube-system lets whoever may
// do it run them as any kube-system service account, and updating Leases
// there includes the scheduler's and the controller-manager's
// leader-election Leases. In traceflow-system the same verbs reach only
// helper pods and tag claims.
package install

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// DefaultNamespace holds the helper pods and tag claims.
const DefaultNamespace = "traceflow-system"

// Names of what install creates.
const (
	ClusterRoleName = "kubectl-traceflow"
	RoleName        = "kubectl-traceflow-helpers"
	// BindingName names the ClusterRoleBinding and the RoleBinding made for
	// the groups given with --group.
	BindingName = "kubectl-traceflow"
)

// Pod Security Admission's namespace labels.
const (
	PodSecurityEnforce = "pod-security.kubernetes.io/enforce"
	podSecurityAudit   = "pod-security.kubernetes.io/audit"
	podSecurityWarn    = "pod-security.kubernetes.io/warn"
)

// Params say where and for whom to install.
type Params struct {
	// Namespace for the helper pods and tag claims.
	Namespace string
	// Groups are bound to both roles; none means no bindings: the
	// administrator binds users as they see fit.
	Groups []string
}

// Object is one thing install manages.
type Object struct {
	GVR schema.GroupVersionResource
	// Namespaced objects carry their namespace in U.
	U *unstructured.Unstructured
	// OnlyIfAbsentOrOurs: leave one that someone else made (Antrea's CRD).
	OnlyIfAbsentOrOurs bool
}

// Ref is how kubectl names an object: kind.group/name.
func (o Object) Ref() string {
	kind := o.GVR.Resource
	if o.GVR.Group != "" {
		kind += "." + o.GVR.Group
	}
	return kind + "/" + o.U.GetName()
}

var (
	gvrCRD                = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrNamespace          = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	gvrClusterRole        = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	gvrClusterRoleBinding = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	gvrRole               = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	gvrRoleBinding        = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
)

// managed labels every installed object, so uninstall and cleanup find it.
func managed() map[string]string {
	return map[string]string{labels.ManagedBy: labels.Manager}
}

// ClusterRules are what every user of the plugin needs cluster-wide.
func ClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		// Resolve SRC and DST (pods, Services, nodes); find Antrea's pods; tell a pod's or a Service's IP from
		// others; read the helper namespace's Pod Security level.
		{APIGroups: []string{""}, Resources: []string{"pods", "services", "namespaces", "nodes"}, Verbs: []string{"get", "list"}},
		// A Service's endpoints and their nodes.
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list"}},
		// Name the policy behind a drop.
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"list"}},
		// Is Antrea healthy? Its own health records, with heartbeats (pods
		// stand in only where these are missing).
		{APIGroups: []string{traceflow.Group}, Resources: []string{"antreacontrollerinfos", "antreaagentinfos"}, Verbs: []string{"get", "list"}},
		// The trace record (agent mode, or our CRD in helper mode).
		{APIGroups: []string{traceflow.Group}, Resources: []string{"traceflows"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		{APIGroups: []string{traceflow.Group}, Resources: []string{"traceflows/status"}, Verbs: []string{"get", "update"}},
		// Does a helper's node still run its kubelet? Its heartbeat, the
		// node's Lease in kube-node-lease (the check is skipped without it).
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}},
		// Is the served Traceflow CRD ours? (Else the record stays in the plugin.)
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
			ResourceNames: []string{traceflow.CRDName}, Verbs: []string{"get"}},
	}
}

// NamespaceRules are what helper mode writes, in its own namespace only.
func NamespaceRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete", "deletecollection"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"pods/attach"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
	}
}

// Objects returns what install applies, in the order to apply it (Remove
// goes the other way).
func Objects(p Params) ([]Object, error) {
	if p.Namespace == "" {
		p.Namespace = DefaultNamespace
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(traceflow.CRDManifest(), &crd.Object); err != nil {
		return nil, fmt.Errorf("decoding the embedded CRD manifest (a bug in this build): %w", err)
	}
	ns := &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Namespace, Labels: map[string]string{
			labels.ManagedBy: labels.Manager,
			// Helper pods use hostNetwork and a hostPath: level privileged,
			// for this namespace only.
			PodSecurityEnforce: "privileged", podSecurityAudit: "privileged", podSecurityWarn: "privileged",
		}},
	}
	cr := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleName, Labels: managed()},
		Rules:      ClusterRules(),
	}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: p.Namespace, Labels: managed()},
		Rules:      NamespaceRules(),
	}
	out := []Object{{GVR: gvrCRD, U: crd, OnlyIfAbsentOrOurs: true}}
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj any
	}{{gvrNamespace, ns}, {gvrClusterRole, cr}, {gvrRole, role}} {
		u, err := toUnstructured(o.obj)
		if err != nil {
			return nil, err
		}
		out = append(out, Object{GVR: o.gvr, U: u})
	}
	if len(p.Groups) == 0 {
		return out, nil
	}
	groups := append([]string(nil), p.Groups...)
	sort.Strings(groups)
	var subjects []rbacv1.Subject
	for _, g := range groups {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
	}
	crb := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: BindingName, Labels: managed()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ClusterRoleName},
		Subjects:   subjects,
	}
	rb := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: BindingName, Namespace: p.Namespace, Labels: managed()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: RoleName},
		Subjects:   subjects,
	}
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj any
	}{{gvrClusterRoleBinding, crb}, {gvrRoleBinding, rb}} {
		u, err := toUnstructured(o.obj)
		if err != nil {
			return nil, err
		}
		out = append(out, Object{GVR: o.gvr, U: u})
	}
	return out, nil
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	// The converter writes creationTimestamp: null, which apply ignores but
	// a reader of --dry-run would wonder about.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// Manifest is Objects as a YAML stream for `kubectl apply -f -`.
func Manifest(objs []Object) ([]byte, error) {
	var out []byte
	for i, o := range objs {
		b, err := yaml.Marshal(o.U.Object)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", o.Ref(), err)
		}
		if i > 0 {
			out = append(out, "---\n"...)
		}
		out = append(out, b...)
	}
	return out, nil
}
