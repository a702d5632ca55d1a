package matrix

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
)

// ParseExpected reads files users write (and edit by hand): it must not
// panic, every rejection is a *check.Error that names a line, and a file
// it accepts writes back to one that reads to the same cells.
func FuzzParseExpected(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "expected-3x3x2.golden"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add([]byte(head + "cells: []\n"))
	f.Add([]byte(head + "namespace: demo\ncells:\n- from: b\n  to: a\n  port: 53\n  expect: Refused\n"))
	f.Add([]byte(head + "cells:\n- {from: '123', to: \"null\", port: ICMP, expect: incomplete}\n- {from: a.b, to: c, port: UDP/53, expect: dropped}\n"))
	f.Add([]byte(head + "cells:\n- {from: a, to: b, port: tcp/80, expect: delivered}\n- {from: a, to: b, port: 80, expect: dropped}\n"))
	f.Add([]byte(head + "cells: &c [*c]\n"))
	f.Add([]byte(head + "cells:\n- {from: a, to: b\n"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseExpected("f.yaml", data)
		if err != nil {
			var ce *check.Error
			if !errors.As(err, &ce) {
				t.Fatalf("not a *check.Error: %v", err)
			}
			if ce.At.Line < 1 || ce.At.File != "f.yaml" {
				t.Fatalf("error without a place: %v", err)
			}
			return
		}
		if len(e.Order) != len(e.Cells) {
			t.Fatalf("%d cells in order, %d in the map", len(e.Order), len(e.Cells))
		}
		g, states := gridOf(e)
		var b bytes.Buffer
		if err := WriteExpected(&b, e.Namespace, g, states); err != nil {
			t.Fatal(err)
		}
		back, err := ParseExpected("back.yaml", b.Bytes())
		if err != nil {
			t.Fatalf("what was written does not read back: %v\n%s", err, b.String())
		}
		if back.Namespace != e.Namespace || len(back.Cells) != len(e.Cells) {
			t.Fatalf("read back namespace %q and %d cells, want %q and %d:\n%s", back.Namespace, len(back.Cells), e.Namespace, len(e.Cells), b.String())
		}
		for c, w := range e.Cells {
			if back.Cells[c].State != w.State {
				t.Fatalf("%s: read back %s, want %s:\n%s", c, back.Cells[c].State, w.State, b.String())
			}
		}
	})
}

// gridOf is the smallest grid holding every cell of e, with e's states:
// sources, destinations and ports in the order the file first names them.
func gridOf(e *Expected) (Grid, map[Cell]State) {
	var g Grid
	seen := map[any]bool{}
	states := map[Cell]State{}
	for _, c := range e.Order {
		if !seen["from "+c.From] {
			seen["from "+c.From] = true
			g.Sources = append(g.Sources, c.From)
		}
		if !seen["to "+c.To] {
			seen["to "+c.To] = true
			g.Destinations = append(g.Destinations, c.To)
		}
		if !seen[c.Port] {
			seen[c.Port] = true
			g.Ports = append(g.Ports, c.Port)
		}
		states[c] = e.Cells[c].State
	}
	return g, states
}
