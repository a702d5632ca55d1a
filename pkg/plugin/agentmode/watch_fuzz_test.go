package agentmode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muesli/termenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// chanWatch is a watch whose events are all there and then it closes.
type chanWatch chan watch.Event

func (w chanWatch) Stop()                          {}
func (w chanWatch) ResultChan() <-chan watch.Event { return w }

// watchEvents decodes a watch's body as client-go's dynamic client does:
// a stream of {"type", "object"}, each object as unstructured.
func watchEvents(stream []byte) []watch.Event {
	var out []watch.Event
	d := json.NewDecoder(bytes.NewReader(stream))
	for {
		var e metav1.WatchEvent
		if d.Decode(&e) != nil {
			return out
		}
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode(e.Object.Raw, nil, nil)
		if err != nil {
			return out
		}
		out = append(out, watch.Event{Type: watch.EventType(e.Type), Object: obj})
	}
}

// FuzzWatchEvents feeds a watch on a Traceflow, as the API server streams
// it while Antrea's controller and agents write the status, through the
// agent-mode runner's follower and the view model, and renders the live
// view. The seeds in testdata/fuzz/FuzzWatchEvents are statuses a real
// Antrea v2.3.2 wrote (testdata/fuzz/README.md). An ending has a verdict
// and a reason; the view, drawn without colour, carries no escape byte
// (strings from the cluster are escaped before they reach a terminal).
func FuzzWatchEvents(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream []byte) {
		events := watchEvents(stream)
		w := make(chanWatch, len(events))
		for _, e := range events {
			w <- e
		}
		close(w)
		m := &outcome.Model{}
		clock := time.Date(2026, 12, 1, 22, 9, 20, 0, time.UTC)
		r := &Runner{SourceNode: "tf-node-1", Now: func() time.Time { clock = clock.Add(5 * time.Millisecond); return clock },
			Emit: func(u outcome.Update) { m.Apply(u) }}
		fl := &follower{r: r, name: "a-to-b", nodes: map[string]*nodeSeen{}, dst: outcome.DestinationPod}
		end, done, why := fl.consume(context.Background(), w)
		if done && (end.verdict == "" || end.reason == "") {
			t.Fatalf("ended without a verdict or reason: %+v", end)
		}
		if !done && why == nil {
			t.Fatal("the watch ended without a reason")
		}
		frame := view.NewLive(80, 0, termenv.Ascii, false).Frame(m, clock, 0)
		if strings.ContainsRune(frame, 0x1b) {
			t.Fatalf("an escape byte reached the live view:\n%q", frame)
		}
		_ = view.Summary(m, outcome.ExpectDelivered, false)
	})
}

// The recorded seeds are whole traces: each ends with Antrea's verdict, so
// the fuzzer starts from watches that reach every part of the follower.
func TestWatchSeedsEnd(t *testing.T) {
	files, _ := filepath.Glob("testdata/fuzz/FuzzWatchEvents/*")
	if len(files) < 4 {
		t.Fatalf("%d seeds in testdata/fuzz/FuzzWatchEvents, want the 4 recorded traces", len(files))
	}
	for _, file := range files {
		b, err := os.ReadFile(file) //nolint:gosec // the package's own testdata
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(b), "\n", 3)
		stream, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		events := watchEvents([]byte(stream))
		w := make(chanWatch, len(events))
		for _, e := range events {
			w <- e
		}
		close(w)
		r := &Runner{SourceNode: "tf-node-1", Now: time.Now, Emit: func(outcome.Update) {}}
		fl := &follower{r: r, name: "a-to-b", nodes: map[string]*nodeSeen{}, dst: outcome.DestinationPod}
		if end, done, _ := fl.consume(context.Background(), w); !done || end.verdict == "" {
			t.Errorf("%s: %d events, ended %v %+v", file, len(events), done, end)
		}
	}
}
