//go:build integration

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// started is a helper process whose lines are read as they come.
type started struct {
	cmd   *exec.Cmd
	lines chan report.Line
	start time.Time
	ready time.Duration // process start to the ready line, on our clock
	// readyLine is the ready line; its time is when the sender injects.
	readyLine report.Line
}

func startHelper(b *testing.B, args ...string) *started {
	b.Helper()
	s := &started{cmd: helper(args...), lines: make(chan report.Line, 64)}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	s.start = time.Now()
	if err := s.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		defer close(s.lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				if !errors.Is(err, io.EOF) {
					b.Error(err)
				}
				return
			}
			l, err := report.ParseLine(line)
			if err != nil {
				b.Error(err)
				return
			}
			s.lines <- l
		}
	}()
	l, ok := <-s.lines
	if !ok || l.Type != report.TypeReady {
		b.Fatalf("first line %+v", l)
	}
	s.ready = time.Since(s.start)
	s.readyLine = l
	return s
}

func (s *started) result(b *testing.B) report.Line {
	b.Helper()
	// The result line, which a cleanup line follows (the helper's last).
	var last report.Line
	for l := range s.lines {
		if l.Type != report.TypeCleanup {
			last = l
		}
	}
	_ = s.cmd.Wait()
	if last.Type != report.TypeResult {
		b.Fatalf("last line before the cleanup line %+v", last)
	}
	return last
}

type samples []time.Duration

// stepSamples collects the ready lines' setup steps, by role and step, in
// the order first seen.
type stepSamples struct {
	order []string
	by    map[string]samples
}

func (st *stepSamples) add(role string, l report.Line) {
	if st.by == nil {
		st.by = map[string]samples{}
	}
	for _, s := range l.Ready.Setup {
		name := role + "-" + strings.NewReplacer("/", "-", " ", "-", "'", "").Replace(s.Step)
		if _, ok := st.by[name]; !ok {
			st.order = append(st.order, name)
		}
		st.by[name] = append(st.by[name], time.Duration(s.Micros)*time.Microsecond)
	}
}

// report reports each step's median: where the time before the probe is
// injected goes, step by step.
func (st *stepSamples) report(b *testing.B) {
	for _, name := range st.order {
		s := st.by[name]
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		b.ReportMetric(float64(s[len(s)/2].Microseconds())/1000, name+"-p50-ms")
	}
}

func (s samples) report(b *testing.B, name string) {
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return
	}
	b.ReportMetric(float64(s[len(s)/2].Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(s[len(s)-1].Microseconds())/1000, name+"-max-ms")
}

// BenchmarkIntegrationHelper measures the helper as the plugin runs it (a
// process per trace): start to ready, and injection (the sender's ready
// line, after which it injects at once) to verdict (the last node's result
// line), on one node and across two nodes joined by Geneve.
//
//	make bench-helper
func BenchmarkIntegrationHelper(b *testing.B) {
	b.Run("one-node", func(b *testing.B) {
		n, a, pb := newNode(b)
		var ready, verdict samples
		var steps stepSamples
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tag := fmt.Sprint(1 + i%62)
			s := startHelper(b, "trace", "--ovs-rundir", n.Dir, "--bridge", n.Bridge, "--source-pod", a.Ref(),
				"--destination", pb.IP.String(), "--tcp", "80", "--tag", tag, "--timeout", "5s")
			r := s.result(b)
			if *r.ExitCode != 0 {
				b.Fatalf("trace exit %d: %s", *r.ExitCode, r.Explanation.Summary)
			}
			ready = append(ready, s.ready)
			verdict = append(verdict, r.Time.Sub(s.readyLine.Time))
			steps.add("sender", s.readyLine)
		}
		ready.report(b, "ready")
		verdict.report(b, "verdict")
		steps.report(b)
	})
	b.Run("two-nodes", func(b *testing.B) {
		n, a, _ := newNode(b)
		n2 := ovstest.NewNode(b, 2)
		pb := n2.AddPod("default", "pod-b", 2)
		ovstest.Join(n, n2)
		n.Pipeline()
		n2.Pipeline()
		var ready, verdict samples
		var steps stepSamples
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			tag := fmt.Sprint(1 + i%62)
			rcv := startHelper(b, "receive", "--ovs-rundir", n2.Dir, "--bridge", n2.Bridge, "--tag", tag, "--timeout", "5s")
			snd := startHelper(b, "trace", "--ovs-rundir", n.Dir, "--bridge", n.Bridge, "--source-pod", a.Ref(),
				"--destination", pb.IP.String(), "--tcp", "80", "--tag", tag, "--timeout", "5s")
			if r := snd.result(b); *r.ExitCode != 0 {
				b.Fatalf("sender exit %d: %s", *r.ExitCode, r.Explanation.Summary)
			}
			r := rcv.result(b)
			if *r.ExitCode != 0 {
				b.Fatalf("receiver exit %d: %s", *r.ExitCode, r.Explanation.Summary)
			}
			ready = append(ready, rcv.ready, snd.ready)
			verdict = append(verdict, r.Time.Sub(snd.readyLine.Time))
			steps.add("receiver", rcv.readyLine)
			steps.add("sender", snd.readyLine)
		}
		ready.report(b, "ready")
		verdict.report(b, "verdict")
		steps.report(b)
	})
}
