package helpermode

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// The streams of a trace: each helper's log, followed line by line into
// the loop, and the sender's standard input, which carries its go.

// attach streams the go to the sender's standard input.
func (t *tracer) attach(ctx context.Context, ns, pod string) {
	err := t.r.Cluster.Attach(ctx, ns, pod, t.goR)
	_ = t.goR.Close()
	if err != nil {
		select {
		case t.lines <- lineMsg{pod: pod, attachErr: err}:
		case <-ctx.Done():
		}
	}
}

// follow streams a helper's log into the loop.
func (t *tracer) follow(ctx context.Context, ns, pod string) {
	send := func(m lineMsg) bool {
		select {
		case t.lines <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	rc, err := openLog(ctx, t.r.Cluster, ns, pod)
	if err != nil {
		send(lineMsg{pod: pod, eof: fmt.Errorf("read its log: %w", err)})
		return
	}
	defer rc.Close() //nolint:errcheck // a read-only stream
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64*1024), 8*1024*1024)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		m := lineMsg{pod: pod}
		l, err := report.ParseLine(sc.Bytes())
		if err != nil {
			// Not a report line (a panic's stack trace, a shell error):
			// kept as text so a failing helper can be quoted.
			m.text = sc.Text()
		} else {
			m.line = l
		}
		if !send(m) {
			return
		}
	}
	end := sc.Err()
	if end == nil {
		end = io.EOF
	}
	send(lineMsg{pod: pod, eof: end})
}

// logRetry is how often to ask again for the log of a container that the
// kubelet does not yet count as started, and logRetryFor how long to.
const (
	logRetry    = 50 * time.Millisecond
	logRetryFor = 30 * time.Second
)

// openLog opens a helper's log as soon as the kubelet serves it. The
// kubelet's own view of a container lags its Started event by up to its
// pod-lifecycle relist period (1 s), and answers 400 Bad Request ("waiting
// to start") until then; there is nothing to watch for that moment, so ask
// again, briefly, until it serves the log.
func openLog(ctx context.Context, c Cluster, ns, pod string) (io.ReadCloser, error) {
	deadline := time.Now().Add(logRetryFor)
	for {
		rc, err := c.Logs(ctx, ns, pod)
		if err == nil || !apierrors.IsBadRequest(err) || time.Now().After(deadline) {
			return rc, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(logRetry):
		}
	}
}
