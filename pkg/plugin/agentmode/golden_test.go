package agentmode

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/muesli/termenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/goldenfile"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// ticking is a clock that moves 5 ms on every reading, so that the times
// an agent-mode trace shows are fixed by the order of its updates.
type ticking struct {
	mu sync.Mutex
	t  time.Time
}

func (c *ticking) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(5 * time.Millisecond)
	return c.t
}

// Issue 25, done-when 4: the statuses a watch saw for a real Antrea
// v2.3.2 inter-node trace in which the receiver's agent wrote first
// (testdata/recorded-watch-receiver-first.json), through the runner and
// the live and plain views: the sender's hops come first, after the
// injection, and the receiver's after them, timed from the injection.
func TestReceiverFirstViewGolden(t *testing.T) {
	clock := &ticking{t: time.Date(2026, 12, 1, 22, 9, 20, 0, time.UTC)}
	var mu sync.Mutex
	m := &outcome.Model{}
	live := view.NewLive(80, 0, termenv.Ascii, false)
	var frames, plain bytes.Buffer
	p := view.Plain{W: &plain}
	step := 0
	r := &Runner{Records: newFakeServer(writes(statuses(t, "recorded-watch-receiver-first.json"))...), Now: clock.Now, Slack: 50 * time.Millisecond, SourceNode: "tf-node-1",
		Emit: func(u outcome.Update) {
			mu.Lock()
			defer mu.Unlock()
			m.Apply(u)
			if err := p.Write(m, u); err != nil {
				t.Error(err)
			}
			fmt.Fprintf(&frames, "=== after %T\n%s", u, live.Frame(m, u.When(), step))
			step++
		}}
	tf := &traceflow.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "a-to-b-x7k2p"}, Spec: traceflow.Spec{Timeout: 20}}
	started := outcome.TraceStarted{Name: tf.Name, Engine: "agent", EngineReason: "Antrea is healthy", Source: "demo/a", Destination: "demo/b",
		DestinationKind: outcome.DestinationPod, Packet: "TCP port 80, flags SYN"}
	if _, err := r.Run(context.Background(), tf, started, false); err != nil {
		t.Fatal(err)
	}
	plain.WriteString(view.Summary(m, outcome.ExpectDelivered, false) + "\n")
	goldenfile.Check(t, "live-receiver-first.txt", frames.Bytes())
	goldenfile.Check(t, "plain-receiver-first.txt", plain.Bytes())
}
