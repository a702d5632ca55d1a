package install

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Cleanup judges what is stale by the API server's clock: without it, it
// removes nothing and says to fix RBAC or use --force; with Force it goes
// on without it.
func TestCleanupWithoutTheServerClock(t *testing.T) {
	for _, tc := range []struct {
		name    string
		force   bool
		wantErr string
		removed []string
	}{
		{name: "stops", wantErr: "read the API server's clock (a dry-run create of a Lease in traceflow-system) to tell what is stale: leases is forbidden; check your RBAC, or use --force"},
		{name: "forced", force: true, removed: []string{"traceflow-system/tf-x-sender-abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace,
				Name: "tf-x-sender-abc", Labels: map[string]string{labels.ManagedBy: labels.Manager}}})
			kube.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("leases is forbidden")
			})
			removed, err := Cleanup(context.Background(), kube, nil, CleanupOptions{AllNamespaces: true, Force: tc.force})
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if !slices.Equal(removed.Pods, tc.removed) {
				t.Errorf("removed pods %v, want %v", removed.Pods, tc.removed)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
