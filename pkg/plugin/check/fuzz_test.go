package check

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Parse reads files users write: it must not panic, and every rejection
// is an *Error that names a line in the file.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	nodes, err := os.ReadFile(filepath.Join("testdata", "nodes.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(nodes)
	f.Add([]byte(head + "cases: [{name: a, from: {ip: '::1', via: no/x}, to: {node: node/x}, port: 1}]\n"))
	f.Add([]byte(head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  port: 80\n"))
	f.Add([]byte(head + "cases: [{name: a, from: {selector: 'x in (a'}, to: {ip: '::1'}}]\n"))
	f.Add([]byte(head + "defaults: {roundTrip: true, expect: refused}\ncases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  port: 80\n  roundTrip: false\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("f.yaml", data)
		if err == nil {
			if len(s.Cases) == 0 {
				t.Fatal("a suite without cases was accepted")
			}
			return
		}
		var se *Error
		if !errors.As(err, &se) {
			t.Fatalf("not a *suite.Error: %v", err)
		}
		if se.At.Line < 1 {
			t.Fatalf("error without a line: %v", err)
		}
	})
}
