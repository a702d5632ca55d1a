package apierr

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

func TestWrap(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	var (
		notFound     = apierrors.NewNotFound(pods, "a")
		forbidden    = apierrors.NewForbidden(pods, "a", errors.New("RBAC"))
		podSecurity  = apierrors.NewForbidden(pods, "a", errors.New(`violates PodSecurity "restricted:latest"`))
		unauthorized = apierrors.NewUnauthorized("bad token")
		other        = errors.New("connection refused")
	)
	all := Messages{
		NotFound:     "pod a not found: check -n",
		PodSecurity:  Say{Before: "podsecurity: "},
		Forbidden:    Say{Before: "forbidden: ", After: "; grant it"},
		Unauthorized: Say{Before: "unauthorized: ", After: "; log in"},
		Other:        Say{Before: "other: ", After: "; check the cluster"},
	}
	onlyOther := Messages{Other: Say{Before: "create pods: "}}
	tests := []struct {
		name string
		err  error
		m    Messages
		want string
		code exitcode.Code
	}{
		{"not found is the user's input", notFound, all, "pod a not found: check -n", exitcode.Usage},
		{"not found unset is any failure", notFound, onlyOther, "create pods: " + notFound.Error(), exitcode.Setup},
		{"PodSecurity", podSecurity, all, "podsecurity: " + podSecurity.Error(), exitcode.Setup},
		{"PodSecurity unset is Forbidden", podSecurity, Messages{Forbidden: all.Forbidden, Other: all.Other}, "forbidden: " + podSecurity.Error() + "; grant it", exitcode.Setup},
		{"forbidden", forbidden, all, "forbidden: " + forbidden.Error() + "; grant it", exitcode.Setup},
		{"forbidden unset is other", forbidden, onlyOther, "create pods: " + forbidden.Error(), exitcode.Setup},
		{"unauthorized", unauthorized, all, "unauthorized: " + unauthorized.Error() + "; log in", exitcode.Setup},
		{"unauthorized unset is other", unauthorized, Messages{Forbidden: all.Forbidden, Other: all.Other}, "other: " + unauthorized.Error() + "; check the cluster", exitcode.Setup},
		{"other", other, all, "other: connection refused; check the cluster", exitcode.Setup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Wrap(tt.err, tt.m)
			if got.Error() != tt.want || exitcode.Of(got) != tt.code {
				t.Errorf("Wrap = %q (exit %d), want %q (exit %d)", got, exitcode.Of(got), tt.want, tt.code)
			}
			if tt.code == exitcode.Setup && !errors.Is(got, tt.err) {
				t.Errorf("Wrap(%v) does not wrap the server's error", tt.err)
			}
		})
	}
}
