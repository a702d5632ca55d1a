// Package goldenfile compares rendered output with the golden files under a
// test package's testdata/, for every package that pins output that way:
// `go test ./pkg/... -update` rewrites them, and the diff of the rewrite
// is the change to review.
package goldenfile

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// update is -update on the command line of a test binary that imports
// this package. Test binaries are the only importers.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Check compares got with testdata/NAME, after rewriting the file with
// got under -update.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path) //nolint:gosec // the calling test names its own testdata file
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got; run go test -update if the change is intended):\n%s", path, d)
	}
}
