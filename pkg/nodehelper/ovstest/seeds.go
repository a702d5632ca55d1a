package ovstest

import (
	"encoding/json"
	"errors"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	libovsdb "github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// ReadSeed reads the values of a "go test fuzz v1" corpus file whose
// lines are []byte(...) or string(...) literals, as bytes: the seeds the
// recorders write and the fuzz targets' own checks read back.
func ReadSeed(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path) //nolint:gosec // the calling package's own testdata
	if err != nil {
		t.Fatalf("%v (go test -tags integration -record-seeds records it)", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "go test fuzz v1" {
		t.Fatalf("%s is not a go test fuzz v1 file", path)
	}
	var out [][]byte
	for _, l := range lines[1:] {
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(l, "string("), "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		out = append(out, []byte(s))
	}
	return out
}

// ErrLibovsdbPanics stands for libovsdb v0.8.1's panic on a column value
// that is an empty JSON array (ovsSliceToGoNotation reads its first
// element unchecked; RFC 7047 has no such value, and ovsdb-server never
// sends one). It panics in the client's reader goroutine, where the helper
// cannot recover it: the fuzzer found it, the ovsdb package's
// TestLibovsdbEmptyArrayPanics pins it, and the fuzz targets step over it
// until libovsdb checks.
var ErrLibovsdbPanics = errors.New("libovsdb panics on an empty array value")

// DecodeMonitorReply is json.Unmarshal of a monitor_cond_since reply, with
// libovsdb's known panic (and only that one) turned into
// ErrLibovsdbPanics.
func DecodeMonitorReply(reply []byte) (r libovsdb.MonitorCondSinceReply, err error) {
	defer func() {
		if p := recover(); p != nil {
			if !strings.Contains(string(debug.Stack()), "libovsdb/ovsdb.ovsSliceToGoNotation") {
				panic(p)
			}
			err = ErrLibovsdbPanics
		}
	}()
	err = json.Unmarshal(reply, &r)
	return r, err
}

// LoadSchema reads a database schema as a real ovsdb-server sent it (its
// get_schema reply), kept in the calling package's testdata.
func LoadSchema(tb testing.TB, file string) libovsdb.DatabaseSchema {
	tb.Helper()
	b, err := os.ReadFile(file) //nolint:gosec // the calling package's own testdata
	if err != nil {
		tb.Fatal(err)
	}
	var s libovsdb.DatabaseSchema
	if err := json.Unmarshal(b, &s); err != nil {
		tb.Fatal(err)
	}
	return s
}
