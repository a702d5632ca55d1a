// Command testsummary reads `go test -json` on stdin, passes the tests' own
// output through, and ends with a count of the tests that ran, passed, failed
// and were skipped (with each skip's reason), so that a suite that silently
// skips shows up in the CI log. It exits 1 if any test or package failed, if
// -forbid-skips is set and a test was skipped, or if -floors-dir is set and a
// package ran fewer top-level tests than its floor there (a test renamed out
// of its suite's -run selector, a file that lost its build tag, a package
// that stopped building its tests): a suite's floor file is named for its
// label (see floorFile), one "PACKAGE COUNT" line per package, and moves
// only with a commit that says why (-update-floors writes today's counts).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type counts struct {
	pass, fail, skip int
	// top counts the top-level tests that ran (passed or failed): the
	// number a floor holds, which subtests named after data do not move.
	top int
}

// options are the flags.
type options struct {
	label        string
	forbidSkips  bool
	floorsDir    string
	updateFloors bool
	// recap, when set, is a file the suite's result line and failed tests
	// are appended to, for a recap at the end of a run of several suites:
	// a CI log shown from its end then says what failed, and where.
	recap string
}

func main() {
	var o options
	flag.StringVar(&o.label, "label", "tests", "name of the suite in the summary")
	flag.BoolVar(&o.forbidSkips, "forbid-skips", false, "treat a skipped test as a failure")
	flag.StringVar(&o.floorsDir, "floors-dir", "", "directory of the suites' floor files (floorFile names the suite's); a package under its floor fails the run")
	flag.BoolVar(&o.updateFloors, "update-floors", false, "write this run's counts as the suite's floors instead of checking them")
	flag.StringVar(&o.recap, "recap", "", "append the suite's result line and its failed tests to this file")
	flag.Parse()
	os.Exit(run(os.Stdin, os.Stdout, o))
}

func run(in io.Reader, out io.Writer, o options) int {
	label, forbidSkips := o.label, o.forbidSkips
	per := map[string]*counts{}
	lastOutput := map[string]string{} // package/test -> last output line, the skip reason
	errLike := map[string][]string{}  // package/test -> its first entries that read as errors
	var skips, failures []string
	pkgFailed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil {
			_, _ = fmt.Fprintln(out, string(line)) // build errors arrive as plain text
			continue
		}
		c := per[ev.Package]
		if c == nil {
			c = &counts{}
			per[ev.Package] = c
		}
		key := ev.Package + "." + ev.Test
		switch ev.Action {
		case "output":
			_, _ = fmt.Fprint(out, ev.Output)
			if s := strings.TrimSpace(ev.Output); s != "" && !strings.HasPrefix(s, "---") && !strings.HasPrefix(s, "===") {
				lastOutput[key] = s
				if readsAsError(s) && len(errLike[key]) < maxWhy {
					errLike[key] = append(errLike[key], clip(s))
				}
			}
		case "pass":
			if ev.Test != "" {
				c.pass++
				if !strings.Contains(ev.Test, "/") {
					c.top++
				}
			}
		case "fail":
			if ev.Test != "" {
				c.fail++
				if !strings.Contains(ev.Test, "/") {
					c.top++
				}
				failures = append(failures, fmt.Sprintf("%s %s: %s", ev.Package, ev.Test, why(errLike[key], lastOutput[key])))
			} else {
				pkgFailed = true
				if c.fail == 0 { // else its failed tests say why
					failures = append(failures, fmt.Sprintf("%s: the package failed (a build error, a panic or a timeout: see its output)", ev.Package))
				}
			}
		case "skip":
			if ev.Test != "" {
				c.skip++
				skips = append(skips, fmt.Sprintf("%s %s: %s", ev.Package, ev.Test, lastOutput[key]))
			}
		}
	}
	var total counts
	pkgs := make([]string, 0, len(per))
	for p := range per {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	_, _ = fmt.Fprintf(out, "\n==== %s summary ====\n", label)
	for _, p := range pkgs {
		c := per[p]
		if c.pass+c.fail+c.skip == 0 {
			continue
		}
		_, _ = fmt.Fprintf(out, "%-70s ran %4d  passed %4d  failed %3d  skipped %3d\n", p, c.pass+c.fail, c.pass, c.fail, c.skip)
		total.pass += c.pass
		total.fail += c.fail
		total.skip += c.skip
	}
	for _, s := range skips {
		_, _ = fmt.Fprintf(out, "SKIP %s\n", s)
	}
	for _, f := range failures {
		_, _ = fmt.Fprintf(out, "FAIL %s\n", f)
	}
	result := fmt.Sprintf("%s: ran %d (passed %d, failed %d), skipped %d", label, total.pass+total.fail, total.pass, total.fail, total.skip)
	_, _ = fmt.Fprintln(out, result)
	if o.recap != "" {
		if err := appendRecap(o.recap, result, failures); err != nil {
			_, _ = fmt.Fprintf(out, "%s: %v\n", label, err)
			return 1
		}
	}
	floorsOK := true
	if o.floorsDir != "" {
		floorsOK = checkFloors(out, o, per)
	}
	if forbidSkips && total.skip > 0 {
		_, _ = fmt.Fprintf(out, "%s: %d skipped, and this suite may skip none: provide what the skipped tests need\n", label, total.skip)
	}
	if total.fail > 0 || pkgFailed || (forbidSkips && total.skip > 0) || !floorsOK {
		return 1
	}
	return 0
}

// floorFile is the suite's floor file in dir, named for its label in
// lower case with every run of other characters one dash: "unit" is
// unit.floors, "e2e (lab)" e2e-lab.floors.
func floorFile(dir, label string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(label) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	return filepath.Join(dir, b.String()+".floors")
}

// readFloors reads "PACKAGE COUNT" lines; '#' starts a comment.
func readFloors(path string) (map[string]int, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // a file of the repository, named by the Makefile
	if err != nil {
		return nil, err
	}
	floors := map[string]int{}
	for i, line := range strings.Split(string(raw), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.Atoi(f[len(f)-1])
		if len(f) != 2 || err != nil || n < 0 {
			return nil, fmt.Errorf("%s:%d: want \"PACKAGE COUNT\", got %q", path, i+1, line)
		}
		floors[f[0]] = n
	}
	return floors, nil
}

// checkFloors compares the top-level tests each package ran with its
// floor, and says so per package; a package under its floor, one with a
// floor that ran nothing, and one that ran tests with no floor fail (a new
// package gets its floor in the commit that adds it). With -update-floors
// it writes the counts instead.
func checkFloors(out io.Writer, o options, per map[string]*counts) bool {
	path := floorFile(o.floorsDir, o.label)
	if o.updateFloors {
		return writeFloors(out, path, o.label, per)
	}
	floors, err := readFloors(path)
	if err != nil {
		_, _ = fmt.Fprintf(out, "%s: floors: %v\n", o.label, err)
		return false
	}
	ok := true
	names := map[string]bool{}
	for p := range floors {
		names[p] = true
	}
	for p, c := range per {
		if c.top > 0 {
			names[p] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(names)) {
		ran := 0
		if c := per[p]; c != nil {
			ran = c.top
		}
		floor, has := floors[p]
		switch {
		case !has:
			_, _ = fmt.Fprintf(out, "FLOOR %s: ran %d top-level tests and has no floor in %s: add \"%s %d\" in the commit that adds its tests\n", p, ran, path, p, ran)
			ok = false
		case ran < floor:
			_, _ = fmt.Fprintf(out, "FLOOR %s: ran %d top-level tests, under its floor of %d (%s): a test renamed out of the suite's selector, a file without its build tag, or tests removed (then lower the floor in a commit that says why)\n", p, ran, floor, path)
			ok = false
		case ran > floor:
			_, _ = fmt.Fprintf(out, "floor %s: ran %d, floor %d: raise the floor with the commit that adds tests\n", p, ran, floor)
		}
	}
	sum, ran := 0, 0
	for _, n := range floors {
		sum += n
	}
	for _, c := range per {
		ran += c.top
	}
	verdict := "every package at or above its floor"
	if !ok {
		verdict = "UNDER THE FLOOR"
	}
	_, _ = fmt.Fprintf(out, "%s: ran %d top-level tests against a floor of %d (%s): %s\n", o.label, ran, sum, path, verdict)
	return ok
}

func writeFloors(out io.Writer, path, label string, per map[string]*counts) bool {
	var b strings.Builder
	fmt.Fprintf(&b, "# Floors of the %s suite: top-level tests each package must run (hack/testsummary).\n", label)
	for _, p := range slices.Sorted(maps.Keys(per)) {
		if c := per[p]; c.top > 0 {
			fmt.Fprintf(&b, "%s %d\n", p, c.top)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil { //nolint:gosec // a file of the repository, world-readable
		_, _ = fmt.Fprintf(out, "%s: %v\n", label, err)
		return false
	}
	_, _ = fmt.Fprintf(out, "%s: wrote the floors to %s\n", label, path)
	return true
}

// appendRecap adds the suite's result line and its failures to the recap
// file.
func appendRecap(path, result string, failures []string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644) //nolint:gosec // the Makefile names the recap file
	if err != nil {
		return fmt.Errorf("open the recap %s: %w", path, err)
	}
	var b strings.Builder
	b.WriteString(result + "\n")
	for _, x := range failures {
		b.WriteString("  FAIL " + x + "\n")
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the recap %s: %w", path, err)
	}
	return nil
}

// maxWhy is how many of a failed test's error-like entries its summary
// line names.
const maxWhy = 4

// entryHeader is how a test's log entry begins: the file and line of the
// t.Errorf or t.Logf that wrote it.
var entryHeader = regexp.MustCompile(`^[\w.-]+_test\.go:\d+: `)

// errorWords are words a test's failure message says and its logs rarely
// do: go test -json does not tell t.Errorf's output from t.Logf's, and a
// test that logs after its error (a soak's result, a window's times) would
// otherwise be summarized by its last log line.
var errorWords = regexp.MustCompile(`(?i)\bwant|\bfail|\berror|\bnot\b|\bno\b|\bexpected\b`)

// readsAsError reports whether a line of output begins a log entry that
// reads as a test's error, or is a command's error line the test logged
// (the plugin's "error: ..." under a trace that exited other than wanted).
func readsAsError(s string) bool {
	return entryHeader.MatchString(s) && errorWords.MatchString(s) || strings.HasPrefix(s, "error: ")
}

// why is what a failed test's summary line says: its error-like entries,
// each on a line of its own, or else its last line of output.
func why(entries []string, last string) string {
	if len(entries) == 0 {
		return last
	}
	return strings.Join(entries, "\n      ")
}

// clip shortens a line for the summary.
func clip(s string) string {
	const most = 300
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}
