package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A daemon of the lab that dies mid-run (an ovs-vswitchd aborting in its
// conntrack, a kubelet crashing) used to show only as a string of later
// timeouts, each test blaming its own trace. The watch reads the PID of
// every daemon lab.sh started (STATE/pids/NAME.pid) once a second, and a
// daemon seen dead on two reads in a row under the same PID is printed at
// once, with the end of its log, so that the failures that follow are read
// for what they are. A daemon lab.sh stops on purpose (restart, a
// refreshed agent) has NAME.stopping beside its PID file until lab.sh
// starts it again, and is passed over; one stopped with SIGSTOP (a kubelet,
// an Antrea agent) is alive. Dead means gone or a zombie: this machine's
// PID 1 may leave a dead daemon unreaped for seconds.
//
// A death fails the run: every test that starts after it fails at once
// (requireLab), naming the daemon, and TestMain exits non-zero even where
// the test running at that moment passed. Before, the watch only reported,
// until it had stayed silent through CI runs of every mode (it did, once
// lab.sh marked its own stops and kube-apiserver's graceful restart).
type labWatch struct {
	mu   sync.Mutex
	dead string // what died, "" while every daemon lives
	stop chan struct{}
	done chan struct{}
}

var daemons labWatch

// startWatch watches the daemons of the lab whose state is in dir.
func startWatch(dir string) {
	daemons.mu.Lock()
	daemons.dead = ""
	daemons.mu.Unlock()
	daemons.stop, daemons.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(daemons.done)
		seen := map[string]int{} // daemon -> PID found dead on the last read
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-daemons.stop:
				return
			case <-tick.C:
			}
			if what := deadDaemons(dir, seen); what != "" {
				daemons.mu.Lock()
				daemons.dead = what
				daemons.mu.Unlock()
				fmt.Fprintf(os.Stderr, "e2e: a daemon of the lab died; later failures may follow from it: %s\n", what)
				return
			}
		}
	}()
}

// stopWatch ends the watch (before the lab is taken down on purpose).
func stopWatch() {
	if daemons.stop == nil {
		return
	}
	select {
	case <-daemons.stop:
	default:
		close(daemons.stop)
	}
	<-daemons.done
}

// labDead says which daemon of the lab died, or "".
func labDead() string {
	daemons.mu.Lock()
	defer daemons.mu.Unlock()
	return daemons.dead
}

// deadDaemons reads every PID file in dir/pids and returns, for the daemons
// dead on this read and on the last one under the same PID, what died and
// the end of its log; seen carries the last read's dead PIDs.
func deadDaemons(dir string, seen map[string]int) string {
	files, _ := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
	sort.Strings(files)
	var dead []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if _, err := os.Stat(filepath.Join(dir, "pids", name+".stopping")); err == nil {
			delete(seen, name) // lab.sh stops it on purpose
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue // removed by lab.sh down
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || processAlive(pid) {
			delete(seen, name)
			continue
		}
		if seen[name] == pid {
			dead = append(dead, fmt.Sprintf("%s (pid %d) is no longer running; the end of its log:\n%s", name, pid, logTail(dir, name)))
		}
		seen[name] = pid
	}
	return strings.Join(dead, "\n")
}

// processAlive: the process exists and is not a zombie (a daemon's parent,
// lab.sh's backgrounded shell, is gone, so nobody may have reaped it yet).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// logTail is the last lines of a daemon's own log (OVS and OVN daemons
// write NAME.ovs.log; lab.sh sends every daemon's output to NAME.log).
func logTail(dir, name string) string {
	for _, f := range []string{name + ".ovs.log", name + ".log"} {
		b, err := os.ReadFile(filepath.Join(dir, "logs", f))
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 8 {
			lines = lines[len(lines)-8:]
		}
		return "  " + filepath.Join(dir, "logs", f) + ":\n    " + strings.Join(lines, "\n    ")
	}
	return "  (no log in " + filepath.Join(dir, "logs") + ")"
}
