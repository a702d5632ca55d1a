package cli

import (
	"strings"
	"sync"
	"testing"
)

// Concurrent traces (a check run) each register their cleanup: the one a
// second Ctrl-C starts names every trace still running, and nothing once
// all are done. Before, each trace set its own and cleared it when done,
// so a trace that ended wiped the cleanup of those still running.
func TestAbandonerNamesEveryRunningTrace(t *testing.T) {
	var mu sync.Mutex
	var last []string
	a := newAbandoner(func(args []string) {
		mu.Lock()
		last = args
		mu.Unlock()
	}, []string{"--helper-namespace", "ns"})
	doneRun := a.Add("tfcheck-x")
	doneA := a.Add("a")
	doneB := a.Add("b")
	doneA()
	doneA() // twice is once
	got := strings.Join(last, " ")
	if want := "cleanup --force --trace b --trace tfcheck-x --helper-namespace ns"; got != want {
		t.Errorf("after a ended: %q, want %q", got, want)
	}
	doneB()
	doneRun()
	if last != nil {
		t.Errorf("nothing runs, yet the cleanup is %q", last)
	}
}
