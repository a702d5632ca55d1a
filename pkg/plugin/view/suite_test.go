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
