package matrix

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/goldenfile"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func TestCompare(t *testing.T) {
	file := head + "cells:\n" +
		"- {from: a, to: b, port: tcp/80, expect: delivered}\n" + // line 4
		"- {from: a, to: b, port: tcp/8080, expect: dropped}\n" + // line 5
		"- {from: b, to: a, port: tcp/80, expect: refused}\n" + // line 6
		"- {from: old, to: a, port: tcp/80, expect: delivered}\n" + // line 7
		"- {from: a, to: old, port: tcp/80, expect: dropped}\n" // line 8
	e, err := ParseExpected("m.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	at := func(line int) check.Pos { return check.Pos{File: "m.yaml", Line: line} }
	g := Grid{Sources: []string{"a", "b"}, Destinations: []string{"a", "b"}, Ports: []Port{tcp80, tcp8080}}
	asFiled := map[Cell]State{
		{"a", "b", tcp80}: Delivered, {"a", "b", tcp8080}: Dropped, {"b", "a", tcp80}: Refused,
		{"old", "a", tcp80}: Delivered, {"a", "old", tcp80}: Dropped,
	}
	with := func(changes map[Cell]State) map[Cell]State {
		out := map[Cell]State{}
		for c, s := range asFiled {
			out[c] = s
		}
		for c, s := range changes {
			out[c] = s
		}
		return out
	}
	old := Grid{Sources: []string{"a", "old"}, Destinations: []string{"a", "old"}, Ports: []Port{tcp80}}
	for _, tc := range []struct {
		name string
		grid Grid
		got  map[Cell]State
		want []Mismatch
	}{
		{"as filed, an untraced cell neither listed nor traced", g, with(nil), nil},
		{
			"a state changed and a cell new",
			g, with(map[Cell]State{{"a", "b", tcp8080}: Delivered, {"b", "a", tcp8080}: Delivered}),
			[]Mismatch{
				{Cell: Cell{"a", "b", tcp8080}, Want: Dropped, Got: Delivered, Listed: true, At: at(5)},
				{Cell: Cell{"b", "a", tcp8080}, Got: Delivered},
			},
		},
		{
			"listed in the grid but not traced, and a cell outside it not traced",
			g, map[Cell]State{{"a", "b", tcp80}: Delivered, {"a", "b", tcp8080}: Running, {"b", "a", tcp80}: Refused, {"old", "a", tcp80}: Delivered},
			[]Mismatch{
				{Cell: Cell{"a", "b", tcp8080}, Want: Dropped, Got: Running, Listed: true, At: at(5)},
				{Cell: Cell{"a", "old", tcp80}, Want: Dropped, Got: Pending, Listed: true, At: at(8)},
			},
		},
		{
			"grid order, then file order",
			old, map[Cell]State{{"a", "old", tcp80}: Delivered, {"old", "a", tcp80}: Incomplete},
			[]Mismatch{
				{Cell: Cell{"a", "old", tcp80}, Want: Dropped, Got: Delivered, Listed: true, At: at(8)},
				{Cell: Cell{"old", "a", tcp80}, Want: Delivered, Got: Incomplete, Listed: true, At: at(7)},
				{Cell: Cell{"a", "b", tcp80}, Want: Delivered, Got: Pending, Listed: true, At: at(4)},
				{Cell: Cell{"a", "b", tcp8080}, Want: Dropped, Got: Pending, Listed: true, At: at(5)},
				{Cell: Cell{"b", "a", tcp80}, Want: Refused, Got: Pending, Listed: true, At: at(6)},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Compare(e, tc.grid, tc.got)); d != "" {
				t.Errorf("Compare (-want +got):\n%s", d)
			}
		})
	}
}

func TestMismatchString(t *testing.T) {
	c := Cell{"client-a", "web-1", tcp80}
	at := check.Pos{File: "matrix.yaml", Line: 7}
	for _, tc := range []struct {
		name string
		m    Mismatch
		want string
	}{
		{"changed", Mismatch{c, Dropped, Delivered, true, at}, "client-a → web-1 tcp/80: expected dropped (matrix.yaml:7), got delivered"},
		{"not listed", Mismatch{Cell: c, Got: Delivered}, "client-a → web-1 tcp/80: not in the expected matrix, got delivered"},
		{"not traced", Mismatch{c, Refused, Pending, true, at}, "client-a → web-1 tcp/80: expected refused (matrix.yaml:7), got pending: the cell was not traced to an end in this run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// What WriteExpected writes is pinned, and reads back to the same cells
// in grid order.
func TestWriteExpectedRoundTrip(t *testing.T) {
	g, s := small()
	// Names YAML would read as another type unless quoted.
	g.Sources = append(g.Sources, "null", "123", "true")
	for _, from := range []string{"null", "123", "true"} {
		s[Cell{from, "web-1", Port{traceflow.UDP, 53}}] = Delivered
		s[Cell{from, "web-1", tcp80}] = Dropped
	}
	for _, tc := range []struct{ name, namespace, golden string }{
		{"with a namespace", "demo", "expected-3x3x2.golden"},
		{"without", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteExpected(&b, tc.namespace, g, s); err != nil {
				t.Fatal(err)
			}
			if tc.golden != "" {
				goldenfile.Check(t, tc.golden, b.Bytes())
			}
			e, err := ParseExpected("written.yaml", b.Bytes())
			if err != nil {
				t.Fatalf("%v\n%s", err, b.String())
			}
			if e.Namespace != tc.namespace {
				t.Errorf("namespace %q, want %q", e.Namespace, tc.namespace)
			}
			var want []Cell
			for _, c := range g.Cells() {
				if s[c].final() {
					want = append(want, c)
				}
			}
			if d := cmp.Diff(want, e.Order); d != "" {
				t.Errorf("order (-want +got):\n%s", d)
			}
			for _, c := range e.Order {
				if e.Cells[c].State != s[c] {
					t.Errorf("%s: read back %s, written %s", c, e.Cells[c].State, s[c])
				}
			}
			if m := Compare(e, g, s); len(m) != 0 {
				t.Errorf("a run compared with its own file differs: %v", m)
			}
			if n := strings.Count(b.String(), "\n- {"); n != len(want) {
				t.Errorf("%d flow-style cell lines, want %d:\n%s", n, len(want), b.String())
			}
		})
	}
}

func TestWriteExpectedNothingTraced(t *testing.T) {
	g, _ := small()
	var b bytes.Buffer
	if err := WriteExpected(&b, "", g, map[Cell]State{{"client-a", "web-1", tcp80}: Running}); err != nil {
		t.Fatal(err)
	}
	if want := head + "cells: []\n"; b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	e, err := ParseExpected("empty.yaml", b.Bytes())
	if err != nil || len(e.Cells) != 0 {
		t.Errorf("read back %v, %v; want no cells", e, err)
	}
}
