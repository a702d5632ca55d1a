//go:build !e2e

package e2e

// This file is the unit suite's reading of the e2e suite (the e2e files
// carry the e2e build tag, this one the opposite, so `go test ./...` runs
// it without a lab). It reads the e2e tests' source and holds every one
// that runs a trace or asserts a verdict to real traffic between the same
// endpoints, and writes the README's list of them.

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite the README's list of verdict tests from the e2e source")

// noVerdict names the e2e tests that run a trace but assert no verdict of
// it, each with the reason: the trace is refused, fails or is interrupted
// before a verdict, by design. A test listed here may not assert a
// verdict (TestEveryVerdictHasTraffic checks it reaches no verdict word).
var noVerdict = map[string]string{
	"TestCheckBadSuitesCreateNothing":      "suite files that are refused before any trace (exit 1)",
	"TestCheckInterruptLeavesNothing":      "the suite is interrupted mid-way (exit 3); what is asserted is the cleanup",
	"TestCheckSecondInterruptCleansUp":     "the suite is interrupted twice (exit 3); what is asserted is the background cleanup",
	"TestFaultHelperImageMissingOnOneNode": "the helper cannot start on one node (exit 4)",
	"TestOutsideBadInput":                  "sources outside the cluster with destinations or flags that are refused before anything is created (exit 1)",
	"TestFaultKubeletStoppedOnReceiver":    "the receiver's kubelet is stopped (exit 4)",
	"TestTraceInterruptRemovesHelpers":     "the trace is interrupted (exit 3); what is asserted is the cleanup",
	"TestTraceKilledThenCleanup":           "the plugin is killed mid-trace; what is asserted is `cleanup`",
	"TestTraceMissingPodCreatesNothing":    "the source pod does not exist (exit 1)",
	"TestTraceNodeWithoutOVS":              "the node has no OVS where the helper looks (exit 4)",
	"TestTraceSecondInterruptExitsAtOnce":  "the trace is interrupted twice (exit 3); what is asserted is the exit and the cleanup",
}

// replayed names the e2e tests whose verdicts are recordings played back,
// with no dataplane for traffic to cross (their names say so), and why.
var replayed = map[string]string{
	"TestAgentModeReplayedWithoutEtcdProgressNotify": "a bare API server on an etcd without progress notifications, no nodes' dataplane: Antrea's recorded statuses (pkg/plugin/agentmode/testdata) are replayed; what is asserted is that agent mode's watch ends with the recorded verdict",
}

// verdictWord is a trace's fate as the tests spell it in what they assert.
var verdictWord = regexp.MustCompile(`\b(Delivered|Dropped|Rejected|ForwardedOutOfNetwork|DELIVERED|DROPPED|REJECTED)\b|result=[A-Z]`)

// e2eFunc is what one function of the e2e source does, by itself.
type e2eFunc struct {
	file    string
	uses    map[string]bool // identifiers it names: the functions it calls or hands on
	verdict bool            // names a verdict (report.Action*, verdictFor, .Verdict, a verdict word)
	trace   bool            // runs `kubectl traceflow` on a trace (or a check suite)
	traffic bool            // sends real traffic itself (the workload client)
}

// oracles are the functions that send real traffic or hold a verdict to
// it, and what the README says of each, the most telling first: the list
// shows the first that a test reaches, then any traffic of its own.
var oracles = []struct{ name, says string }{
	{"checkCasesAgainstTraffic", "each case's verdict against its own traffic"},
	{"verdictOrFailure", "the verdict after the fault against the traffic"},
	{"checkAgainstTraffic", "the trace's fate and exit code against the traffic"},
	{"execIn", "a request loop between the traced pods during the traces"},
	{"realTrafficResult", "the traffic's outcome, compared in the test"},
	{"outsideTraffic", "the lab host's own requests, compared in the test"},
}

func isOracle(name string) bool {
	return slices.ContainsFunc(oracles, func(o struct{ name, says string }) bool { return o.name == name })
}

// traceRunners start `kubectl traceflow` for a trace.
var traceRunners = []string{"runTrace", "traceRunErr", "runTracesAtOnce", "startTrace", "runCheck", "traceAndTraffic"}

func readE2E(t *testing.T) map[string]*e2eFunc {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	fns := map[string]*e2eFunc{}
	e2eBuild := build.Default
	e2eBuild.BuildTags = []string{"e2e"}
	for _, file := range files {
		// The unit suite's files (this one, inventory_modes_test.go) are no part of the e2e suite.
		if ok, err := e2eBuild.MatchFile(".", file); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || fd.Recv != nil {
				continue
			}
			fn := &e2eFunc{file: file, uses: map[string]bool{}}
			fns[fd.Name.Name] = fn
			var traceflowLit, checkLit bool
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					// What a test logs is no assertion.
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Logf" || sel.Sel.Name == "Log") {
						return false
					}
				case *ast.Ident:
					fn.uses[n.Name] = true
					fn.verdict = fn.verdict || n.Name == "verdictFor"
					fn.trace = fn.trace || slices.Contains(traceRunners, n.Name)
				case *ast.SelectorExpr:
					x, _ := n.X.(*ast.Ident)
					isReport := x != nil && x.Name == "report"
					fn.verdict = fn.verdict || n.Sel.Name == "Verdict" || isReport && verdictWord.MatchString(strings.TrimPrefix(n.Sel.Name, "Action"))
				case *ast.BasicLit:
					if n.Kind != token.STRING {
						break
					}
					s, err := strconv.Unquote(n.Value)
					if err != nil {
						break
					}
					fn.verdict = fn.verdict || verdictWord.MatchString(s)
					fn.traffic = fn.traffic || strings.Contains(s, "/workload")
					// A trace or suite started with exec.Command("kubectl", "traceflow", ...).
					fn.trace = fn.trace || s == "--tcp" || s == "--udp" || s == "--icmp"
					traceflowLit = traceflowLit || s == "traceflow"
					checkLit = checkLit || s == "check"
				}
				return true
			})
			fn.trace = fn.trace || traceflowLit && checkLit
		}
	}
	return fns
}

// reach is what a test does through every function of the package it
// reaches: whether it runs a trace, names a verdict, and which oracles.
type reach struct {
	verdict, trace bool
	oracles        []string
}

func reachOf(fns map[string]*e2eFunc, name string) reach {
	var r reach
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		fn := fns[n]
		if fn == nil || seen[n] {
			return
		}
		seen[n] = true
		r.verdict = r.verdict || fn.verdict
		r.trace = r.trace || fn.trace
		if isOracle(n) {
			r.oracles = append(r.oracles, n)
		} else if fn.traffic {
			r.oracles = append(r.oracles, n+"`: requests of its own")
		}
		for u := range fn.uses {
			walk(u)
		}
	}
	walk(name)
	sort.Strings(r.oracles)
	return r
}

// TestEveryVerdictHasTraffic: every e2e test that runs a trace or asserts a
// verdict reaches real traffic between the same endpoints (an oracle), or
// is named in noVerdict and asserts no verdict.
func TestEveryVerdictHasTraffic(t *testing.T) {
	fns := readE2E(t)
	tests := testNames(fns)
	if len(tests) < 50 {
		t.Fatalf("read %d e2e tests: not the e2e suite", len(tests))
	}
	for _, name := range tests {
		r := reachOf(fns, name)
		reason, exempt := noVerdict[name]
		if why, ok := replayed[name]; ok {
			if len(r.oracles) > 0 || !strings.Contains(name, "Replayed") {
				t.Errorf("%s is listed as replayed (%s): its name must say Replayed, and it sends no traffic", name, why)
			}
			continue
		}
		switch {
		case exempt && len(r.oracles) > 0:
			t.Errorf("%s is in noVerdict but sends real traffic (%s): list it as backed instead", name, strings.Join(r.oracles, ", "))
		case exempt && r.verdict:
			t.Errorf("%s is in noVerdict (%s) but names a verdict: back it with real traffic", name, reason)
		case exempt && !r.trace:
			t.Errorf("%s is in noVerdict but runs no trace: remove it from the list", name)
		case !exempt && (r.verdict || r.trace) && len(r.oracles) == 0:
			t.Errorf("%s (%s) runs a trace or asserts a verdict, and reaches no real traffic: hold it to the workload's traffic between the same endpoints, or say in noVerdict why it has no verdict", name, fns[name].file)
		}
	}
	for _, list := range []map[string]string{noVerdict, replayed} {
		for name := range list {
			if fns[name] == nil {
				t.Errorf("%s is listed, and is no e2e test", name)
			}
		}
	}
}

func testNames(fns map[string]*e2eFunc) []string {
	var names []string
	for n := range fns {
		if strings.HasPrefix(n, "Test") && n != "TestMain" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

const (
	readmeBegin = "<!-- verdict-tests: begin (generated by `go test ./test/e2e -run TestREADMEListsVerdictTests -update-readme`) -->"
	readmeEnd   = "<!-- verdict-tests: end -->"
)

// verdictTable is the README's list: every e2e test that runs a trace or
// asserts a verdict, its modes and the traffic behind it; then the tests
// whose traces end without a verdict, and why.
func verdictTable(t *testing.T) string {
	fns := readE2E(t)
	modes := modesOf(t)
	var b strings.Builder
	b.WriteString("Real traffic is the lab's workload client (`/workload get`, `udp`, `ping`) between the same endpoints as the trace.\n\n")
	b.WriteString("| e2e test | lab modes | how its verdicts are held to real traffic |\n|---|---|---|\n")
	n := 0
	for _, name := range testNames(fns) {
		r := reachOf(fns, name)
		if _, exempt := noVerdict[name]; exempt || replayed[name] != "" || !(r.verdict || r.trace) || len(r.oracles) == 0 {
			continue
		}
		n++
		var how []string
		for _, o := range oracles {
			if slices.Contains(r.oracles, o.name) {
				how = append(how, o.says)
				break
			}
		}
		for _, o := range r.oracles {
			if !isOracle(o) {
				how = append(how, "`"+o)
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, strings.Join(modes[name], ", "), strings.Join(how, "; "))
	}
	b.WriteString("\nTests that run a trace and assert no verdict of it, and tests whose verdicts are replayed recordings:\n\n| e2e test | lab modes | why no traffic |\n|---|---|---|\n")
	for _, list := range []map[string]string{noVerdict, replayed} {
		for _, name := range slices.Sorted(maps.Keys(list)) {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, strings.Join(modes[name], ", "), list[name])
		}
	}
	return fmt.Sprintf("%d e2e tests assert verdicts, each held to real traffic:\n\n%s", n, b.String())
}

// TestREADMEListsVerdictTests: the README's list is the one the e2e
// source gives today.
func TestREADMEListsVerdictTests(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	head, rest, ok1 := strings.Cut(readme, readmeBegin)
	_, tail, ok2 := strings.Cut(rest, readmeEnd)
	if !ok1 || !ok2 {
		t.Fatalf("README.md lacks the markers %q and %q", readmeBegin, readmeEnd)
	}
	want := head + readmeBegin + "\n" + verdictTable(t) + readmeEnd + tail
	if *updateReadme {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil { //nolint:gosec // the README is world-readable
			t.Fatal(err)
		}
		return
	}
	if want != readme {
		t.Errorf("README.md's list of verdict tests is not the e2e source's: run go test ./test/e2e -run TestREADMEListsVerdictTests -update-readme")
	}
}
