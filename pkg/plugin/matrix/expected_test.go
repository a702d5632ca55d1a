package matrix

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

const head = "apiVersion: " + APIVersion + "\nkind: " + Kind + "\n"

func TestParseExpected(t *testing.T) {
	udp53 := Port{traceflow.UDP, 53}
	icmp := Port{Protocol: traceflow.ICMP}
	for _, tc := range []struct {
		name      string
		in        string
		namespace string
		want      map[Cell]Want
		order     []Cell
	}{
		{
			name: "flow style",
			in: head + "namespace: demo\ncells:\n" +
				"- {from: client-a, to: web-1, port: tcp/80, expect: delivered}\n" +
				"- {from: client-a, to: web-1, port: tcp/8080, expect: dropped}\n",
			namespace: "demo",
			want: map[Cell]Want{
				{"client-a", "web-1", tcp80}:   {Delivered, check.Pos{File: "m.yaml", Line: 5}},
				{"client-a", "web-1", tcp8080}: {Dropped, check.Pos{File: "m.yaml", Line: 6}},
			},
			order: []Cell{{"client-a", "web-1", tcp80}, {"client-a", "web-1", tcp8080}},
		},
		{
			name: "block style, other forms of port and expect",
			in: head + "cells:\n- from: b\n  to: a\n  port: 53\n  expect: Refused\n" +
				"- from: \"123\"\n  to: 'null'\n  port: UDP/53\n  expect: incomplete\n" +
				"- {from: a.b, to: b, port: ICMP, expect: dropped}\n",
			want: map[Cell]Want{
				{"b", "a", Port{traceflow.TCP, 53}}: {Refused, check.Pos{File: "m.yaml", Line: 4}},
				{"123", "null", udp53}:              {Incomplete, check.Pos{File: "m.yaml", Line: 8}},
				{"a.b", "b", icmp}:                  {Dropped, check.Pos{File: "m.yaml", Line: 12}},
			},
			order: []Cell{{"b", "a", Port{traceflow.TCP, 53}}, {"123", "null", udp53}, {"a.b", "b", icmp}},
		},
		{name: "no cells", in: head + "cells: []\n", want: map[Cell]Want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseExpected("m.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if e.File != "m.yaml" || e.Namespace != tc.namespace {
				t.Errorf("file %q namespace %q, want m.yaml %q", e.File, e.Namespace, tc.namespace)
			}
			if d := cmp.Diff(tc.want, e.Cells); d != "" {
				t.Errorf("cells (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.order, e.Order); d != "" {
				t.Errorf("order (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseExpectedErrors(t *testing.T) {
	cell := func(from, to, port, expect string) string {
		return "- {from: " + from + ", to: " + to + ", port: " + port + ", expect: " + expect + "}\n"
	}
	ok := cell("a", "b", "tcp/80", "delivered")
	for _, tc := range []struct{ name, in, want string }{
		{"empty file", "", "m.yaml:1: the file is empty: an expected matrix needs apiVersion " + APIVersion + ", kind ConnectivityMatrix and cells"},
		{"only a comment", "# nothing yet\n", "m.yaml:1: the file is empty: an expected matrix needs apiVersion " + APIVersion + ", kind ConnectivityMatrix and cells"},
		{"second document", head + "cells: []\n---\n" + head + "cells: []\n", "m.yaml:4: a second YAML document: put one matrix in each file"},
		{"syntax error", head + "cells:\n- {from: a, to: b\n", "m.yaml:4: YAML syntax: did not find expected ',' or '}' (in the collection that starts on this line)"},
		{"scanner error", head + "cells:\n- a: b: c\n", "m.yaml:4: YAML syntax: mapping values are not allowed in this context"},
		{"tab indent", head + "cells:\n\t- a\n", "m.yaml:4: YAML syntax: found character that cannot start any token"},
		{"not a mapping", "- a\n", "m.yaml:1: want a mapping of apiVersion, kind, namespace, cells, got a list"},
		{"wrong apiVersion", "apiVersion: v1\nkind: ConnectivityMatrix\ncells: []\n", `m.yaml:1: apiVersion: "v1" is not known; this version of kubectl traceflow reads ` + APIVersion},
		{"wrong kind", "apiVersion: " + APIVersion + "\nkind: CheckSuite\ncells: []\n", `m.yaml:2: kind: "CheckSuite" is not known; this version of kubectl traceflow reads ConnectivityMatrix`},
		{"missing kind", "apiVersion: " + APIVersion + "\ncells: []\n", "m.yaml:1: kind: missing: an expected matrix starts with apiVersion: " + APIVersion + " and kind: ConnectivityMatrix"},
		{"unknown top field", head + "cell: []\n", "m.yaml:3: cell: unknown field; the top level takes apiVersion, kind, namespace, cells"},
		{"top field twice", head + "cells: []\ncells: []\n", "m.yaml:4: cells: given twice"},
		{"bad namespace", head + "namespace: Demo\ncells: []\n", `m.yaml:3: namespace: "Demo" is not a namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"missing cells", head, "m.yaml:1: cells: missing: list the cells, one {from, to, port, expect} each"},
		{"cells not a list", head + "cells: {}\n", "m.yaml:3: cells: want a list of cells, got a mapping"},
		{"cells left empty", head + "cells:\n", "m.yaml:3: cells: want a list of cells, got nothing"},
		{"cell not a mapping", head + "cells:\n" + ok + "- a\n", `m.yaml:5: cells[1]: want a mapping of from, to, port, expect, got "a"`},
		{"unknown cell field", head + "cells:\n" + ok + "- {from: a, to: c, port: 80, expect: dropped, timeout: 1s}\n", "m.yaml:5: cells[1].timeout: unknown field; cells[1] takes from, to, port, expect"},
		{"cell field twice", head + "cells:\n- {from: a, from: b}\n", "m.yaml:4: cells[0].from: given twice"},
		{"missing from", head + "cells:\n- {to: b, port: 80, expect: dropped}\n", "m.yaml:4: cells[0].from: missing: every cell names from, to, port and expect"},
		{"missing to", head + "cells:\n- {from: a, port: 80, expect: dropped}\n", "m.yaml:4: cells[0].to: missing: every cell names from, to, port and expect"},
		{"missing port", head + "cells:\n- {from: a, to: b, expect: dropped}\n", "m.yaml:4: cells[0].port: missing: every cell names from, to, port and expect"},
		{"missing expect", head + "cells:\n- from: a\n  to: b\n  port: 80\n", "m.yaml:4: cells[0].expect: missing: every cell names from, to, port and expect"},
		{"from left empty", head + "cells:\n- from:\n  to: b\n  port: 80\n  expect: dropped\n", "m.yaml:4: cells[0].from: want a pod name, got nothing"},
		{"from a list", head + "cells:\n- {from: [a], to: b, port: 80, expect: dropped}\n", "m.yaml:4: cells[0].from: want a pod name, got a list"},
		{"bad from", head + "cells:\n" + cell("Client_A", "b", "80", "dropped"), `m.yaml:4: cells[0].from: "Client_A" is not a pod name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"bad to", head + "cells:\n- from: a\n  to: -b\n  port: 80\n  expect: dropped\n", `m.yaml:5: cells[0].to: "-b" is not a pod name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"from is to", head + "cells:\n" + cell("a", "a", "80", "dropped"), "m.yaml:4: cells[0].to: a is also from: a pod is not its own destination"},
		{"bad port", head + "cells:\n" + ok + "- from: a\n  to: b\n  port: tcp/0\n  expect: dropped\n", `m.yaml:7: cells[1].port: "tcp/0" is not a port: 0 is out of range; ` + portForms},
		{"icmp with a port", head + "cells:\n" + cell("a", "b", "icmp/8", "dropped"), `m.yaml:4: cells[0].port: "icmp/8" is not a port: icmp takes no port number; ` + portForms},
		{"port a mapping", head + "cells:\n" + cell("a", "b", "{tcp: 80}", "dropped"), "m.yaml:4: cells[0].port: want a port such as tcp/80, got a mapping"},
		{"bad expect", head + "cells:\n" + cell("a", "b", "80", "rejected"), `m.yaml:4: cells[0].expect: "rejected" is not a state a trace ends in: give delivered, dropped, refused or incomplete`},
		{"expect pending", head + "cells:\n" + cell("a", "b", "80", "pending"), `m.yaml:4: cells[0].expect: "pending" is not a state a trace ends in: give delivered, dropped, refused or incomplete`},
		{"duplicate cell", head + "cells:\n" + ok + cell("c", "b", "80", "dropped") + cell("a", "b", "TCP/80", "dropped"), "m.yaml:6: cells[2]: a → b tcp/80 is already listed at line 4: list each cell once"},
		{"alias", head + "cells: &c [*c]\n", "m.yaml:3: cells[0]: want a mapping of from, to, port, expect, got an alias"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseExpected("m.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("parsed %+v, want error %q", e, tc.want)
			}
			var ce *check.Error
			if !errors.As(err, &ce) {
				t.Errorf("%T is not a *check.Error", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestKnown(t *testing.T) {
	in := head + "cells:\n" +
		"- {from: a, to: b, port: tcp/80, expect: delivered}\n" +
		"- from: b\n  to: gone\n  port: tcp/80\n  expect: delivered\n" +
		"- {from: old, to: a, port: tcp/80, expect: delivered}\n"
	e, err := ParseExpected("m.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pods []string
		want string
	}{
		{"all there", []string{"a", "b", "gone", "old", "extra"}, ""},
		{"a destination gone", []string{"a", "b", "old"}, "m.yaml:6: cells[1].to: no pod gone among this run's (the Ready pods of the namespace, or of -l): it was deleted or renamed, is not Ready, or the file is another namespace's; update the expected matrix, or wait for the pod"},
		{"a source gone", []string{"a", "b", "gone"}, "m.yaml:9: cells[2].from: no pod old among this run's (the Ready pods of the namespace, or of -l): it was deleted or renamed, is not Ready, or the file is another namespace's; update the expected matrix, or wait for the pod"},
		{"none there: the first", nil, "m.yaml:4: cells[0].from: no pod a among this run's (the Ready pods of the namespace, or of -l): it was deleted or renamed, is not Ready, or the file is another namespace's; update the expected matrix, or wait for the pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := map[string]bool{}
			for _, p := range tc.pods {
				pods[p] = true
			}
			err := e.Known(pods)
			if got := errString(err); got != tc.want {
				t.Errorf("Known:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestInNamespace(t *testing.T) {
	named, err := ParseExpected("m.yaml", []byte(head+"namespace: demo\ncells: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	unnamed, err := ParseExpected("m.yaml", []byte(head+"cells: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		e    *Expected
		ns   string
		want string
	}{
		{"same", named, "demo", ""},
		{"other", named, "prod", "m.yaml:3: namespace: the file is for namespace demo, the run is in prod: run with -n demo, or use that namespace's file"},
		{"file names none", unnamed, "prod", ""},
		{"built, not read", &Expected{File: "x.yaml", Namespace: "demo"}, "prod", "x.yaml:1: namespace: the file is for namespace demo, the run is in prod: run with -n demo, or use that namespace's file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errString(tc.e.InNamespace(tc.ns)); got != tc.want {
				t.Errorf("InNamespace:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimSpace(err.Error())
}
