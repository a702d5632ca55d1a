// Command testsummary reads `go test -json` on stdin, passes the tests' own
// output through, and ends with a count of the tests that ran, passed, failed
// and were skipped (with each skip's reason), so that a suite that silently
// skips shows up in the CI log. It exits 1 if any test or package failed, or
// if -forbid-skips is set and a test was skipped.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type counts struct{ pass, fail, skip int }

func main() {
	label := flag.String("label", "tests", "name of the suite in the summary")
	forbidSkips := flag.Bool("forbid-skips", false, "treat a skipped test as a failure")
	flag.Parse()
	os.Exit(run(os.Stdin, os.Stdout, *label, *forbidSkips))
}

func run(in io.Reader, out io.Writer, label string, forbidSkips bool) int {
	per := map[string]*counts{}
	lastOutput := map[string]string{} // package/test -> last output line, the skip reason
	var skips []string
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
			}
		case "pass":
			if ev.Test != "" {
				c.pass++
			}
		case "fail":
			if ev.Test != "" {
				c.fail++
			} else {
				pkgFailed = true
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
	_, _ = fmt.Fprintf(out, "%s: ran %d (passed %d, failed %d), skipped %d\n", label, total.pass+total.fail, total.pass, total.fail, total.skip)
	if total.fail > 0 || pkgFailed || (forbidSkips && total.skip > 0) {
		return 1
	}
	return 0
}
