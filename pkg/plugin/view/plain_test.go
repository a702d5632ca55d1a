package view

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
}

var escapeSeq = regexp.MustCompile("\x1b\\[")

func TestPlainGolden(t *testing.T) {
	for name, updates := range scenarios {
		for _, explain := range []bool{false, true} {
			suffix := ""
			if explain {
				suffix = "-wide"
			}
			t.Run(name+suffix, func(t *testing.T) {
				var buf bytes.Buffer
				p := Plain{W: &buf, Explain: explain}
				m := build(updates, func(m *Model, u Update) {
					if err := p.Write(m, u); err != nil {
						t.Fatal(err)
					}
				})
				buf.WriteString(Summary(m, ExpectDelivered) + "\n")
				if escapeSeq.Match(buf.Bytes()) {
					t.Fatal("plain output contains an escape sequence")
				}
				golden(t, "plain-"+name+suffix+".txt", buf.Bytes())
			})
		}
	}
}

func TestPlainEscapesClusterStrings(t *testing.T) {
	var buf bytes.Buffer
	p := Plain{W: &buf}
	m := &Model{}
	u := HelperWaiting{At: at(1), Node: "evil\x1b[2Jnode", Reason: "a b"}
	m.Apply(u)
	if err := p.Write(m, u); err != nil {
		t.Fatal(err)
	}
	if escapeSeq.Match(buf.Bytes()) {
		t.Fatalf("escape sequence from a node name reached the output: %q", buf.String())
	}
}
