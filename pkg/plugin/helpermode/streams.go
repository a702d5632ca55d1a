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

// The streams of a trace on pods of its own: each helper's report, read
// from its log or from an attach to it, line by line into the loop, and
// its standard input, which carries its go.

// attach streams a helper's go to its standard input and its standard
// output (the report) and error (its words to humans) back into the loop.
func (f *podFleet) attach(ctx context.Context, pod string) {
	in := f.input(pod)
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	// Once the report's last line is read, the input ends: the helper
	// waits for that before it exits, so that nothing it wrote is lost
	// with its container (report/FORMAT.md, step 5).
	go f.scan(ctx, pod, outR, true, func() { _ = in.w.Close() })
	go f.scan(ctx, pod, errR, false, nil)
	err := f.cluster.Attach(ctx, f.namespace, pod, in.r, outW, errW)
	// End the input from the writer's side: the attach's copy of it may
	// outlive the stream, and reads end of input quietly where a closed
	// reader would be reported as an error (on the user's terminal).
	_ = in.w.Close()
	if err != nil {
		select {
		case f.lines <- lineMsg{pod: pod, attachErr: err}:
		case <-ctx.Done():
		}
		_ = outW.CloseWithError(err)
	} else {
		_ = outW.Close()
	}
	_ = errW.Close()
}

// follow streams a helper's log into the loop.
func (f *podFleet) follow(ctx context.Context, pod string) {
	rc, err := openLog(ctx, f.cluster, f.namespace, pod)
	if err != nil {
		select {
		case f.lines <- lineMsg{pod: pod, eof: fmt.Errorf("read its log: %w", err)}:
		case <-ctx.Done():
		}
		return
	}
	defer rc.Close() //nolint:errcheck // a read-only stream
	f.scan(ctx, pod, rc, true, nil)
}

// scan sends r's lines into the loop: report lines, and any other line as
// text, kept so that a failing helper can be quoted (a panic's stack
// trace, a shell error). Where r is the report (not standard error), its
// end is sent too, and atLast (if not nil) is called once the report's
// last line is read (reportEnd).
func (f *podFleet) scan(ctx context.Context, pod string, r io.Reader, isReport bool, atLast func()) {
	send := func(m lineMsg) bool {
		select {
		case f.lines <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 8*1024*1024)
	var tail reportEnd
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		m := lineMsg{pod: pod}
		if l, err := report.ParseLine(sc.Bytes()); err == nil && isReport {
			m.line = l
		} else {
			m.text = sc.Text()
		}
		if !send(m) {
			return
		}
		// The answer's lines (a round trip's) come before the probe's
		// cleanup line, which stays the last.
		if atLast != nil && m.text == "" && !m.line.Reply && tail.last(m.line.Type) {
			atLast()
			atLast = nil
		}
	}
	if !isReport {
		return
	}
	end := sc.Err()
	if end == nil {
		end = io.EOF
	}
	send(lineMsg{pod: pod, eof: end})
}

// reportEnd tells a one-shot helper's last line (report/FORMAT.md, Order):
// an error line, which the program writes as it exits, or the cleanup line
// that follows a result line (a cleanup line without a result before it
// is followed by an error line).
type reportEnd struct{ result bool }

func (e *reportEnd) last(t report.LineType) bool {
	switch t {
	case report.TypeError:
		return true
	case report.TypeResult:
		e.result = true
	case report.TypeCleanup:
		return e.result
	}
	return false
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
