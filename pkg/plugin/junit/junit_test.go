package junit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/goldenfile"
	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
)

func sample() Report {
	ts := time.Date(2026, 11, 30, 19, 0, 0, 0, time.UTC)
	return Report{Name: "kubectl traceflow check", Suites: []Suite{{
		Name: "smoke.yaml", Timestamp: ts, Time: 2345 * time.Millisecond,
		Cases: []Case{
			{Name: "a reaches b", Classname: "smoke.yaml", Time: 1500 * time.Millisecond,
				Output: "tf-node-1 SpoofGuard(1) Forwarded\ntf-node-1 Output(9) Delivered pod=demo/b\n"},
			{Name: "nothing reaches locked", Classname: "smoke.yaml", Time: 1700 * time.Millisecond,
				Failure: &Problem{Type: "Dropped", Message: `packet Dropped, expected delivered: dropped on tf-node-2 by table IngressRule, NetworkPolicy deny-locked (flow "priority=100 <&>")`,
					Text: "tf-node-2 IngressRule(7) Dropped\n"}},
			{Name: "db \"quoted\" <tag>", Classname: "smoke.yaml", Time: 0,
				Error: &Problem{Type: "Incomplete", Message: "the trace did not complete before its timeout \x1b[31m", Text: "a \x00 ]]> b"}},
		},
	}}}
}

func TestWriteGolden(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, sample()); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "report.golden.xml", b.Bytes())
}

// The report validates against Jenkins' JUnit schema, with the xmllint
// the distribution ships (make deps installs it).
func TestValidatesAgainstJenkinsSchema(t *testing.T) {
	if _, err := exec.LookPath("xmllint"); err != nil {
		testenv.Missing(t, "xmllint not found: run make deps (Debian package libxml2-utils)")
	}
	var b bytes.Buffer
	if err := Write(&b, sample()); err != nil {
		t.Fatal(err)
	}
	if out, err := validate(t, b.Bytes()); err != nil {
		t.Fatalf("xmllint: %v\n%s\n%s", err, out, b.String())
	}
	// And the check can fail: a report without the required attributes.
	if out, err := validate(t, []byte(`<testsuites><testsuite name="x"><testcase/></testsuite></testsuites>`)); err == nil {
		t.Fatalf("xmllint accepted an invalid report:\n%s", out)
	}
}

// schema is Jenkins' JUnit schema; test/e2e validates the plugin's real
// output against the same file.
const schema = "testdata/jenkins-junit-10.xsd"

func validate(t *testing.T, doc []byte) (string, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "report.xml")
	if err := os.WriteFile(f, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xmllint", "--noout", "--schema", schema, f).CombinedOutput()
	if err == nil && !strings.Contains(string(out), "validates") {
		t.Fatalf("xmllint said nothing of validity: %s", out)
	}
	return string(out), err
}
