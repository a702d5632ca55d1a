//go:build !e2e

package e2e

// The unit suite's reading of the e2e suite's lab modes (modes_test.go).

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// modesOf reads holdsIn (modes_test.go): test name to the lab modes it
// runs in, resolving the mode lists and constants it names (declared in
// any file of the package).
func modesOf(t *testing.T) map[string][]string {
	t.Helper()
	modes, _ := readModes(t)
	return modes
}

// readModes is modesOf, and the modes of everyMode (labModes' rows, in order).
func readModes(t *testing.T) (map[string][]string, []string) {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var decls []ast.Decl
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, f.Decls...)
	}
	consts := map[string]string{}
	lists := map[string][]string{}
	// Lists derived from a table's rows: everyMode = modeNames(labModes).
	derived := map[string]string{}
	var holds *ast.CompositeLit
	for _, d := range decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range g.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, id := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				switch v := vs.Values[i].(type) {
				case *ast.BasicLit:
					consts[id.Name], _ = strconv.Unquote(v.Value)
				case *ast.CompositeLit:
					if id.Name == "holdsIn" {
						holds = v
						continue
					}
					for _, e := range v.Elts {
						switch e := e.(type) {
						case *ast.Ident:
							lists[id.Name] = append(lists[id.Name], e.Name)
						case *ast.CompositeLit: // a row: its name
							if n := rowName(e); n != "" {
								lists[id.Name] = append(lists[id.Name], n)
							}
						}
					}
				case *ast.CallExpr:
					if len(v.Args) == 1 {
						if arg, ok := v.Args[0].(*ast.Ident); ok {
							derived[id.Name] = arg.Name
						}
					}
				}
			}
		}
	}
	for id, table := range derived {
		lists[id] = lists[table]
	}
	if holds == nil {
		t.Fatal("modes_test.go has no holdsIn")
	}
	out := map[string][]string{}
	for _, e := range holds.Elts {
		kv := e.(*ast.KeyValueExpr)
		key, _ := strconv.Unquote(kv.Key.(*ast.BasicLit).Value)
		var names []string
		switch v := kv.Value.(type) {
		case *ast.Ident:
			names = lists[v.Name]
		case *ast.CompositeLit:
			for _, e := range v.Elts {
				names = append(names, e.(*ast.Ident).Name)
			}
		}
		for _, n := range names {
			out[key] = append(out[key], consts[n])
		}
	}
	var every []string
	for _, n := range lists["everyMode"] {
		every = append(every, consts[n])
	}
	return out, every
}

// rowName is the constant a table row names in its name field, or "".
func rowName(row *ast.CompositeLit) string {
	for _, e := range row.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "name" {
				if v, ok := kv.Value.(*ast.Ident); ok {
					return v.Name
				}
			}
		}
	}
	return ""
}

// The e2e suite's table of lab modes (labModes) has one row per mode the
// lab has, a file test/lab/modes/NN-MODE.sh, in the same order: a mode
// added to the lab runs in make test-e2e and must be known to the tests.
func TestEveryLabModeHasARow(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "lab", "modes", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var lab []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sh")
		_, name, _ = strings.Cut(name, "-")
		lab = append(lab, name)
	}
	if len(lab) == 0 {
		t.Fatal("no mode files in test/lab/modes")
	}
	_, table := readModes(t)
	if !slices.Equal(lab, table) {
		t.Errorf("labModes (modes_test.go) lists the modes %v; the lab has %v (test/lab/modes)", table, lab)
	}
}
