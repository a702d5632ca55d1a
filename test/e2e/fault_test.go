//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// The fault campaign of issue 15, in the lab's default mode. Each row ends
// with nothing left on the nodes or in the cluster.

// managedLeases lists every tag claim in the cluster.
func managedLeases(t testing.TB) string {
	t.Helper()
	return strings.TrimSpace(mustKubectl(t, "get", "leases", "-A", "-l="+labels.Selector, "-o", "name"))
}

// Row 7: `cleanup` while another user's trace runs: that trace completes
// correctly, and cleanup removed none of it.
func TestFaultCleanupWhileAnotherTraceRuns(t *testing.T) {
	f := getTraceFixture(t)
	cmd, lines := startTrace(t, "-n", f.ns, "a", "b", "--tcp", "80", "-o", "plain")
	// Its claim and both helper pods exist.
	waitLines(t, lines, 60*time.Second, []string{"waiting", "role=Sender", "scheduled"}, []string{"waiting", "role=Receiver", "scheduled"})
	out := mustKubectl(t, "traceflow", "cleanup")
	if strings.Contains(out, "removed pod") || strings.Contains(out, "removed lease") || strings.Contains(out, "removed traceflow") {
		t.Errorf("cleanup removed part of a running trace:\n%s", out)
	}
	var verdict string
	for l := range lines {
		if strings.Contains(l, "verdict result=") {
			verdict = l
		}
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(verdict, "result=Delivered") {
		t.Fatalf("the trace running during cleanup: exit %d, %q; want exit 0, Delivered", code, verdict)
	}
	if real := realTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}); real != served {
		t.Errorf("the trace said Delivered; real traffic between the same pods was %s", real)
	}
	eventually(t, 10*time.Second, "nothing left", func() error {
		if p := helperPods(t); p != "" {
			return fmt.Errorf("helper pods: %s", p)
		}
		if l := managedLeases(t); l != "" {
			return fmt.Errorf("claims: %s", l)
		}
		return helpersAndFlowsGone(t)
	})
}

// rulesWithout is rules with verb taken off resource.
func rulesWithout(rules []rbacv1.PolicyRule, resource, verb string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		r = *r.DeepCopy()
		if slices.Contains(r.Resources, resource) {
			r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
		}
		out = append(out, r)
	}
	return out
}

func manifest(t testing.TB, objs ...any) string {
	t.Helper()
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}

// Row 5: each RBAC verb of helper mode missing in turn, for a user who
// holds install's roles but for that verb: exit 4 naming the verb, the
// resource and the namespace; nothing left. A record that cannot be
// written is only a warning (exit 0).
func TestFaultRBACVerbMissing(t *testing.T) {
	f := getTraceFixture(t)
	ns := install.DefaultNamespace
	for i, tc := range []struct {
		resource, verb string
		clusterWide    bool
		wantCode       int
		want           string
	}{
		{"leases", "create", false, 4, "not allowed to create leases.coordination.k8s.io in namespace " + ns},
		{"pods", "create", false, 4, "not allowed to create pods in namespace " + ns},
		{"pods", "watch", false, 4, "not allowed to watch pods in namespace " + ns},
		{"events", "watch", false, 4, "not allowed to watch events in namespace " + ns},
		{"traceflows", "create", true, 0, "the trace record could not be created"},
	} {
		t.Run(tc.verb+" "+tc.resource, func(t *testing.T) {
			user := fmt.Sprintf("e2e-rbac-%d", i)
			name := "e2e-tf-" + user
			cr, role := install.ClusterRules(), install.NamespaceRules()
			if tc.clusterWide {
				cr = rulesWithout(cr, tc.resource, tc.verb)
			} else {
				role = rulesWithout(role, tc.resource, tc.verb)
			}
			subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
			apply(t, manifest(t,
				&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
					ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: cr},
				&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
					ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subj,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}},
				&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: role},
				&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Subjects: subj,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}))
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, _ = kubectl(ctx, "delete", "clusterrole,clusterrolebinding", name, "--ignore-not-found")
				_, _ = kubectl(ctx, "delete", "role,rolebinding", "-n", ns, name, "--ignore-not-found")
			})
			r := runTrace(t, "-n", f.ns, "a", "b", "--tcp", "80", "--as", user)
			if r.code != tc.wantCode || !strings.Contains(r.stderr+r.stdout, tc.want) {
				t.Fatalf("without %s %s: exit %d; want exit %d and %q", tc.verb, tc.resource, r.code, tc.wantCode, tc.want)
			}
			if tc.wantCode == 0 {
				checkAgainstTraffic(t, r, realTraffic(t, probe{f.ns, "a", "tcp", f.pods["b"].Status.PodIP, 80}), "")
			}
			eventually(t, 10*time.Second, "nothing left", func() error {
				if p := helperPods(t); p != "" {
					return fmt.Errorf("helper pods: %s", p)
				}
				if l := managedLeases(t); l != "" {
					return fmt.Errorf("claims: %s", l)
				}
				return nil
			})
			assertNothingLeft(t)
		})
	}
}
