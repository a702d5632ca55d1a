package helpermode

import (
	"context"
	"strings"
	"testing"
)

// The plugin ends a one-shot helper's input at the report's last line, and
// only there: the helper exits once its input ends, so ending it earlier
// would lose what the helper still has to say (FORMAT.md, Order).
func TestInputEndsAtTheReportsLastLine(t *testing.T) {
	const (
		ready   = `{"v":1,"type":"ready","time":"2026-12-03T07:00:00Z","ready":{}}`
		result  = `{"v":1,"type":"result","time":"2026-12-03T07:00:01Z","result":{"exitCode":0}}`
		cleanup = `{"v":1,"type":"cleanup","time":"2026-12-03T07:00:01Z","cleanup":{"flowsLeft":0}}`
		failure = `{"v":1,"type":"error","time":"2026-12-03T07:00:01Z","error":{"code":"setup","message":"x"}}`
	)
	for _, tc := range []struct {
		name  string
		lines []string
		endAt int // the line (1-based) after which the input ends; 0: never
	}{
		{"result, then cleanup", []string{ready, result, cleanup}, 3},
		{"cleanup before an error", []string{ready, cleanup, failure}, 3},
		{"an error before OVS", []string{failure}, 1},
		{"cut before its end", []string{ready, result}, 0},
		{"not a report line", []string{"panic: boom", ready}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Nothing reads the lines: at the call, the channel holds
			// every line scan sent before it decided to end the input.
			lines := make(chan lineMsg, 10)
			f := &podFleet{lines: lines}
			endedAfter, calls := 0, 0
			f.scan(context.Background(), "helper", strings.NewReader(strings.Join(tc.lines, "\n")+"\n"), true, func() {
				calls++
				endedAfter = len(lines)
			})
			if calls > 1 {
				t.Errorf("the input was ended %d times", calls)
			}
			if endedAfter != tc.endAt {
				t.Errorf("the input ended after line %d, want %d (0: never)", endedAfter, tc.endAt)
			}
		})
	}
}

func TestReportEnd(t *testing.T) {
	var e reportEnd
	if e.last("cleanup") {
		t.Error("a cleanup line without a result before it is not the last (an error line follows)")
	}
	if e.last("result") || !e.last("cleanup") {
		t.Error("the cleanup line after a result line is the last")
	}
	if !new(reportEnd).last("error") {
		t.Error("an error line is always the last")
	}
}
