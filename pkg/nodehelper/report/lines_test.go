package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteAndRead(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	w := NewWriter(&buf, func() time.Time { return now })
	code := 0
	lines := []Line{
		{Type: TypeReady, Ready: &Ready{HelperVersion: "v1", Mode: RoleSender, Bridge: "br-int", Tag: 5, Cookie: "0x1", Flows: 3}},
		{Type: TypeObservation, Observation: &Observation{Component: ComponentForwarding, ComponentInfo: "Output", Action: ActionDelivered, Pod: "default/pod-b"},
			Hop: &Hop{Index: 9, Table: 20, TableName: "Output", Priority: 200, Cookie: "0x1006", Observed: true}},
		{Type: TypeResult, Result: &NodeResult{Node: "n1", Role: RoleSender}, Explanation: &Explanation{Summary: "delivered"}, ExitCode: &code},
		{Type: TypeError, Error: &Error{Code: ErrorSetup, Message: "no bridge"}},
	}
	for _, l := range lines {
		if err := w.Write(l); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(buf.String(), `{"v":1,"type":"ready","time":"2026-11-30T09:00:00Z","ready":{`) {
		t.Errorf("first line %q", strings.SplitN(buf.String(), "\n", 2)[0])
	}
	r := NewReader(&buf)
	for i, want := range lines {
		got, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		want.Version, want.Time = SchemaVersion, now
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("line %d (-want +got):\n%s", i, d)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last line: %v, want EOF", err)
	}
}

func TestParseLineErrors(t *testing.T) {
	for name, tc := range map[string]struct{ line, want string }{
		"not json":     {`starting helper`, "not JSON"},
		"no version":   {`{"type":"ready","ready":{}}`, "no schema version"},
		"newer":        {`{"v":2,"type":"ready","ready":{}}`, "newer than this reader"},
		"unknown type": {`{"v":1,"type":"gossip"}`, "unknown type"},
		"missing body": {`{"v":1,"type":"result"}`, "lacks its result"},
		"wrong body":   {`{"v":1,"type":"observation","ready":{}}`, "lacks its observation"},
		"no serving":   {`{"v":1,"type":"serving"}`, "lacks its serving"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseLine([]byte(tc.line))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
	// Unknown fields are ignored, so the helper can add them without a new version.
	if _, err := ParseLine([]byte(`{"v":1,"type":"error","error":{"code":"setup","message":"x"},"future":true}`)); err != nil {
		t.Errorf("unknown field rejected: %v", err)
	}
}

// serve's stream: a serving line, then lines of many traces written at
// once, each whole and stamped with its trace's id, and serve's own lines
// with none.
func TestForTraceSharesOneStream(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, nil)
	if err := w.Write(Line{Type: TypeServing, Serving: &Serving{Node: "n1", HelperVersion: "v1"}}); err != nil {
		t.Fatal(err)
	}
	const traces, each = 8, 50
	var wg sync.WaitGroup
	for i := range traces {
		tw := w.ForTrace(fmt.Sprintf("t%d", i))
		wg.Go(func() {
			for range each {
				_ = tw.Write(Line{Type: TypeError, Error: &Error{Code: ErrorSetup, Message: strings.Repeat("x", 2000)}})
			}
		})
	}
	wg.Go(func() {
		for range each {
			_ = w.Write(Line{Type: TypeError, Error: &Error{Code: ErrorUsage, Message: "bad command"}})
		}
	})
	wg.Wait()
	r := NewReader(&buf)
	first, err := r.Next()
	if err != nil || first.Type != TypeServing || first.Serving.Node != "n1" || first.Trace != "" {
		t.Fatalf("first line %+v: %v", first, err)
	}
	count := map[string]int{}
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("a line came out broken: %v", err)
		}
		count[l.Trace]++
	}
	for i := range traces {
		if id := fmt.Sprintf("t%d", i); count[id] != each {
			t.Errorf("trace %s: %d lines, want %d", id, count[id], each)
		}
	}
	if count[""] != each {
		t.Errorf("%d lines without a trace id, want %d", count[""], each)
	}
}

func TestActionNormalize(t *testing.T) {
	if ActionForwardedOutOfOverlay.Normalize() != ActionForwardedOutOfNetwork || ActionDelivered.Normalize() != ActionDelivered {
		t.Error("Normalize")
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"v":1,"type":"ready","time":"2026-11-30T09:00:00Z","ready":{"helperVersion":"v","mode":"Sender","bridge":"b","tag":1,"cookie":"0x1","controllerID":3,"flows":2}}`))
	f.Add([]byte(`{"v":1,"type":"observation","observation":{"component":"LB","action":"Forwarded","translatedDstIP":"10.0.0.1"},"hop":{"index":1,"table":8,"priority":0,"observed":true}}`))
	f.Add([]byte(`{"v":1,"type":"result","result":{"node":"n","observations":[]},"exitCode":2}`))
	f.Add([]byte(`{"v":1,"type":"serving","serving":{"node":"n","helperVersion":"v"}}`))
	f.Add([]byte(`{"v":1,"type":"cleanup","trace":"t1","cleanup":{"cookie":"0x1","flowsLeft":0}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseLine(b)
		if err != nil {
			return
		}
		// Whatever parses must survive a write and a second parse.
		var buf bytes.Buffer
		if err := NewWriter(&buf, nil).Write(l); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseLine(bytes.TrimSpace(buf.Bytes())); err != nil {
			t.Fatalf("re-parse of %q: %v", buf.String(), err)
		}
	})
}

// Text lines written beside JSON lines, from many goroutines, never land
// inside one: every line is either whole JSON or whole text.
func TestWriterTextKeepsLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, nil)
	long := strings.Repeat("x", 100*1024)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				if i%2 == 0 {
					_ = w.ForTrace("t").Write(Line{Type: TypeError, Error: &Error{Code: ErrorSetup, Message: long}})
				} else {
					_ = w.Text("t: a log line")
				}
			}
		})
	}
	wg.Wait()
	json, text := 0, 0
	for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		switch {
		case l == "t: a log line":
			text++
		case strings.HasPrefix(l, "{"):
			if _, err := ParseLine([]byte(l)); err != nil {
				t.Fatalf("a JSON line broken: %v", err)
			}
			json++
		default:
			t.Fatalf("a line neither whole JSON nor the text: %.80q", l)
		}
	}
	if json != 80 || text != 80 {
		t.Errorf("%d JSON and %d text lines, want 80 and 80", json, text)
	}
}
