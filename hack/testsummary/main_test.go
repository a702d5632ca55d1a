package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestFloorFileIsNamedForTheLabel(t *testing.T) {
	for label, want := range map[string]string{
		"unit":                   "unit.floors",
		"integration (OVS, OVN)": "integration-ovs-ovn.floors",
		"e2e (lab)":              "e2e-lab.floors",
	} {
		if got := filepath.Base(floorFile("d", label)); got != want {
			t.Errorf("floorFile(%q) = %s, want %s", label, got, want)
		}
	}
}

// writeModule writes a module of one package whose integration-tagged
// file holds the tests named, and returns its directory.
func writeModule(t *testing.T, tests ...string) string {
	t.Helper()
	dir := t.TempDir()
	src := "//go:build integration\n\npackage p\n\nimport \"testing\"\n"
	for _, name := range tests {
		src += "\nfunc " + name + "(t *testing.T) { t.Run(\"sub\", func(t *testing.T) {}) }\n"
	}
	for file, body := range map[string]string{
		"go.mod":                "module example.com/p\n\ngo 1.22\n",
		"p.go":                  "package p\n",
		"p_integration_test.go": src,
	} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goTestJSON runs `go test -json` as the Makefile selects the integration
// suite: its tag and -run Integration.
func goTestJSON(t *testing.T, dir string) []byte {
	t.Helper()
	cmd := exec.Command("go", "test", "-json", "-count=1", "-tags", "integration", "-run", "Integration", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	return out
}

func summarize(t *testing.T, in []byte, o options) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := run(bytes.NewReader(in), &out, o)
	return code, out.String()
}

// A test renamed out of the suite's selector (TestReadRealDatabases,
// which `-run Integration` never selected, was one) silently stops
// running; its package then runs under its floor, and the run fails.
func TestARenamedTestFailsTheRun(t *testing.T) {
	floors := t.TempDir()
	o := options{label: "integration (OVS, OVN)", forbidSkips: true, floorsDir: floors}
	if err := os.WriteFile(floorFile(floors, o.label), []byte("# two tests\nexample.com/p 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := summarize(t, goTestJSON(t, writeModule(t, "TestIntegrationOne", "TestIntegrationTwo")), o)
	if code != 0 || !strings.Contains(out, "ran 2 top-level tests against a floor of 2") {
		t.Fatalf("both tests ran: exit %d, want 0\n%s", code, out)
	}
	code, out = summarize(t, goTestJSON(t, writeModule(t, "TestIntegrationOne", "TestReadTwo")), o)
	if code != 1 || !strings.Contains(out, "FLOOR example.com/p: ran 1 top-level tests, under its floor of 2") {
		t.Fatalf("one test renamed out of -run Integration: exit %d, want 1 naming the package\n%s", code, out)
	}
}

func TestASkipFailsWhereSkipsAreForbidden(t *testing.T) {
	in := []byte(`{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: no OVS here\n"}
{"Action":"skip","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestB"}
{"Action":"pass","Package":"p"}
`)
	if code, out := summarize(t, in, options{label: "unit"}); code != 0 {
		t.Errorf("skips allowed: exit %d, want 0\n%s", code, out)
	}
	code, out := summarize(t, in, options{label: "unit", forbidSkips: true})
	if code != 1 || !strings.Contains(out, "SKIP p TestA: a_test.go:9: no OVS here") || !strings.Contains(out, "unit: 1 skipped, and this suite may skip none") {
		t.Errorf("a skip in CI: exit %d, want 1 with the skip's reason\n%s", code, out)
	}
}

func TestAPackageWithoutAFloorFails(t *testing.T) {
	floors := t.TempDir()
	o := options{label: "unit", floorsDir: floors}
	if err := os.WriteFile(floorFile(floors, "unit"), []byte("p 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := []byte(`{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"q","Test":"TestB"}
{"Action":"pass","Package":"q","Test":"TestB/sub"}
`)
	code, out := summarize(t, in, o)
	if code != 1 || !strings.Contains(out, `FLOOR q: ran 1 top-level tests and has no floor`) {
		t.Errorf("exit %d, want 1 naming q\n%s", code, out)
	}
	o.updateFloors = true
	if code, out := summarize(t, in, o); code != 0 {
		t.Fatalf("-update-floors: exit %d\n%s", code, out)
	}
	o.updateFloors = false
	if code, out := summarize(t, in, o); code != 0 {
		t.Errorf("after -update-floors: exit %d, want 0\n%s", code, out)
	}
}

func TestAFloorThatRanNothingFails(t *testing.T) {
	floors := t.TempDir()
	o := options{label: "unit", floorsDir: floors}
	if err := os.WriteFile(floorFile(floors, "unit"), []byte("p 1\ngone 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := summarize(t, []byte(`{"Action":"pass","Package":"p","Test":"TestA"}`+"\n"), o)
	if code != 1 || !strings.Contains(out, "FLOOR gone: ran 0 top-level tests, under its floor of 3") {
		t.Errorf("exit %d, want 1 naming gone\n%s", code, out)
	}
}

// A failed test is named, with its last line of output, in the summary
// and in the recap, so that a log read from its end says what failed.
func TestFailuresAreNamedAndRecapped(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: exit 2, want 0\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"--- FAIL: TestA (0.01s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestA"}`,
		`{"Action":"pass","Package":"p","Test":"TestB"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"Action":"fail","Package":"q"}`,
	}, "\n") + "\n"
	recap := filepath.Join(t.TempDir(), "recap")
	if err := os.WriteFile(recap, []byte("e2e (lab): ran 1 (passed 1, failed 0), skipped 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if rc := run(strings.NewReader(in), &out, options{label: "e2e (ovn)", recap: recap}); rc != 1 {
		t.Fatalf("exit %d, want 1", rc)
	}
	if want := "FAIL p TestA: a_test.go:9: exit 2, want 0\n"; !strings.Contains(out.String(), want) {
		t.Errorf("summary does not name the failure %q:\n%s", want, out.String())
	}
	got, err := os.ReadFile(recap)
	if err != nil {
		t.Fatal(err)
	}
	want := "e2e (lab): ran 1 (passed 1, failed 0), skipped 0\n" +
		"e2e (ovn): ran 2 (passed 1, failed 1), skipped 0\n" +
		"  FAIL p TestA: a_test.go:9: exit 2, want 0\n" +
		"  FAIL q: the package failed (a build error, a panic or a timeout: see its output)\n"
	if string(got) != want {
		t.Errorf("recap:\n%s\nwant:\n%s", got, want)
	}
}

// A failed test that logs after its error is summarized by its error,
// not by its last log line.
func TestFailureIsSummarizedByItsErrorNotItsLastLog(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:5: round trip 0 via n1: from 10:00:00.000 to 10:00:01.000\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: round trip 1 via n2: exit 2, want 0 (answered)\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"        engine: helper\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"        error: reply Lost\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:5: round trip 1 via n2: from 10:00:01.000 to 10:00:02.000\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    soak_test.go:116: real requests beside the traces: count=9 failures=0\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: the answer came at 10:00:00\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if rc := run(strings.NewReader(in), &out, options{label: "e2e"}); rc != 1 {
		t.Fatalf("exit %d, want 1", rc)
	}
	want := "FAIL p TestA: a_test.go:9: round trip 1 via n2: exit 2, want 0 (answered)\n" +
		"      error: reply Lost\n" +
		"      soak_test.go:116: real requests beside the traces: count=9 failures=0\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary does not name the error first:\n%s\nwant:\n%s", out.String(), want)
	}
	// A test none of whose entries reads as an error: its last line.
	if want := "FAIL p TestB: b_test.go:3: the answer came at 10:00:00\n"; !strings.Contains(out.String(), want) {
		t.Errorf("summary does not fall back to the last line %q:\n%s", want, out.String())
	}
}
