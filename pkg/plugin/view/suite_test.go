package view

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/muesli/termenv"
)

func suiteRows() []SuiteRow {
	t0 := time.Date(2026, 11, 30, 19, 0, 0, 0, time.UTC)
	return []SuiteRow{
		{Name: "a reaches b", Done: true, Passed: true, Verdict: "Delivered", Where: "delivered to demo/b on tf-node-2", Elapsed: 1830 * time.Millisecond},
		{Name: "nothing reaches locked", Done: true, Passed: false, Verdict: "Delivered", Code: 2,
			Where: "packet Delivered, expected dropped: delivered to demo/locked on tf-node-2", Elapsed: 2100 * time.Millisecond},
		{Name: "a to web [endpoint 10.244.2.7:80]", Running: true, Started: t0},
		{Name: "evil \x1b[31mred\x1b[0m case", Done: true, Passed: false, Verdict: "Incomplete", Code: 3, Where: "timed out \x1b]0;title\x07"},
		{Name: "waiting one"},
	}
}

func TestSuiteLiveGolden(t *testing.T) {
	now := time.Date(2026, 11, 30, 19, 0, 1, 500_000_000, time.UTC)
	frame := NewSuiteLive(100, termenv.Ascii).Frame(suiteRows(), now, 3)
	golden(t, "suite-live.txt", []byte(frame))
	if escapeSeq.MatchString(frame) || strings.Contains(frame, "\x07") {
		t.Errorf("cluster strings reached the terminal unescaped:\n%q", frame)
	}
	for _, line := range strings.Split(strings.TrimSuffix(NewSuiteLive(50, termenv.Ascii).Frame(suiteRows(), now, 3), "\n"), "\n") {
		if w := len([]rune(line)); w > 50 {
			t.Errorf("a line of %d columns on a 50-column terminal: %q", w, line)
		}
	}
}

func TestSuitePlainGolden(t *testing.T) {
	var b bytes.Buffer
	for _, r := range suiteRows() {
		if r.Done {
			if err := (SuitePlain{W: &b}).Write(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.WriteString(SuiteSummary(suiteRows(), 3, 12345*time.Millisecond) + "\n")
	golden(t, "suite-plain.txt", b.Bytes())
	if escapeSeq.MatchString(b.String()) {
		t.Errorf("cluster strings reached the output unescaped:\n%q", b.String())
	}
}

// A round trip's line carries the answer's fate (reply=), and its where
// the way that decided it and that way's hop, as check.Result.Message
// words them; a one-way row has no reply= (the goldens above).
func TestSuiteRoundTripGolden(t *testing.T) {
	rows := []SuiteRow{
		{Name: "a reaches b and back", Done: true, Passed: true, Verdict: "Delivered", Reply: "Answered", Elapsed: 2400 * time.Millisecond,
			Where: "delivered to demo/b on tf-node-2; reply Answered: the answer (SYN-ACK from 10.244.2.7) came back: delivered to demo/a on tf-node-1"},
		{Name: "a reaches c and back", Done: true, Verdict: "Delivered", Reply: "Lost", Code: 2, Elapsed: 2600 * time.Millisecond,
			Where: "reply: packet Delivered but the answer Lost, expected answered: the answer (SYN-ACK from 10.244.2.8) was dropped on tf-node-2 by table EgressDefaultRule (flow ip,nw_src=10.244.2.8) (at tf-node-2, table EgressDefaultRule(44), flow ip,nw_src=10.244.2.8)"},
		{Name: "a is refused by locked", Done: true, Verdict: "Dropped", Code: 2, Elapsed: 1900 * time.Millisecond,
			Where: "forward: packet Dropped, expected refused: no answer was followed (only a round trip that reached the destination can be refused): dropped on tf-node-2 by table IngressDefaultRule (flow ip,nw_dst=10.244.2.3)"},
	}
	var b bytes.Buffer
	for _, r := range rows {
		if err := (SuitePlain{W: &b}).Write(r); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "suite-plain-round-trip.txt", b.Bytes())
	now := time.Date(2026, 11, 30, 19, 0, 1, 500_000_000, time.UTC)
	golden(t, "suite-live-round-trip.txt", []byte(NewSuiteLive(160, termenv.Ascii).Frame(rows, now, 0)))
}
