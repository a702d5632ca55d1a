package helpermode

import (
	"context"
	"errors"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// The API server restarted mid-trace (an upgrade, a crash): the watch on
// the helpers and their log streams break, and the trace ends with exit 4
// naming the API server. What the trace created must still go, so the
// deletions that follow are retried while the server is away, within
// apiAwayBudget instead of cleanupBudget: a restarted API server serves
// again within seconds.

// apiAwayBudget bounds the cleanup after the API server went away.
const apiAwayBudget = 30 * time.Second

// serverAway reports whether err says the API server could not be reached
// or is not serving yet, as opposed to an answer (refused, not found).
func serverAway(err error) bool {
	return err != nil && (utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err))
}

// whileAway runs f, and again while its error says the API server is away,
// with a backoff up to a second, until ctx ends.
func whileAway(ctx context.Context, f func(context.Context) error) error {
	wait := 100 * time.Millisecond
	for {
		err := f(ctx)
		if !serverAway(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
