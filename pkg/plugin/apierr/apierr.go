// Package apierr turns a failed call to the Kubernetes API server into the
// error the user sees: what failed, the server's own words, what to do
// about it, and the exit code. Every command and engine says it through
// Wrap, so that one kind of failure (RBAC, PodSecurity, a missing object)
// is told apart the same way everywhere.
//
// It is not part of package exitcode on purpose: exitcode is imported by
// the domain package outcome, which stays free of Kubernetes libraries.
package apierr

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// Say is a message around the server's error: Before, the error, After.
// The error stays wrapped, for errors.Is and errors.As.
type Say struct{ Before, After string }

// Messages is what to say for each way a call can fail that the user acts
// on differently. An unset Say falls back as its field says; Other is
// always said for what no other field covers.
type Messages struct {
	// NotFound, when set, is the whole message for a missing object,
	// without the server's error: what was not found is the user's input,
	// so it exits Usage. Unset, a missing object is like any failure.
	NotFound string
	// PodSecurity is said when PodSecurity admission rejects an object.
	// Unset: said as Forbidden.
	PodSecurity Say
	// Forbidden is said when RBAC denies the call. Unset: said as Other.
	Forbidden Say
	// Unauthorized is said when the server rejects the credentials.
	// Unset: said as Other.
	Unauthorized Say
	// Other is said for anything else: an unreachable cluster, a server
	// error, a conflict.
	Other Say
}

// Wrap returns err as the user sees it, with exit code Setup (the cluster
// or its setup is the problem) unless NotFound says otherwise. err must
// not be nil.
func Wrap(err error, m Messages) error {
	say := m.Other
	switch {
	case m.NotFound != "" && apierrors.IsNotFound(err):
		return exitcode.UsageErrorf("%s", m.NotFound)
	case m.PodSecurity != (Say{}) && apierrors.IsForbidden(err) && strings.Contains(err.Error(), "violates PodSecurity"):
		say = m.PodSecurity
	case m.Forbidden != (Say{}) && apierrors.IsForbidden(err):
		say = m.Forbidden
	case m.Unauthorized != (Say{}) && apierrors.IsUnauthorized(err):
		say = m.Unauthorized
	}
	return exitcode.Errorf(exitcode.Setup, "%s%w%s", say.Before, err, say.After)
}
