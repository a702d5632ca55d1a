package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

const (
	maxFileLines = 400
	maxFuncLines = 80
	// why is how a file's first comment or a function's doc comment says
	// why it is longer than the limit.
	why = "Longer than the limit because"
)

// productDirs are the shipped code, from this package's directory.
var productDirs = []string{"../../pkg", "../../cmd", "../../internal"}

// TestFilesAndFunctionsStaySmall: a reader should take in a file in one
// sitting and a function on one screen. A file over 400 lines or a
// function over 80 says why in a comment that starts with "Longer than the
// limit because".
func TestFilesAndFunctionsStaySmall(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	for _, root := range productDirs {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			checkFile(t, fset, path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 100 {
		t.Fatalf("read %d product files: the walk is not reading the product", files)
	}
}

func checkFile(t *testing.T, fset *token.FileSet, path string) {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	name := strings.TrimPrefix(path, "../../")
	topSaysWhy := saysWhy(f.Doc) || (len(f.Comments) > 0 && saysWhy(f.Comments[0]))
	if n := fset.Position(f.End()).Line; n > maxFileLines && !topSaysWhy {
		t.Errorf("%s has %d lines (at most %d): split it by topic, or say at its top why not (%q)", name, n, maxFileLines, why)
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines && !saysWhy(fd.Doc) {
			t.Errorf("%s: %s has %d lines (at most %d): split it, or say in its doc comment why not (%q)", name, fd.Name.Name, n, maxFuncLines, why)
		}
	}
}

func saysWhy(g *ast.CommentGroup) bool {
	return g != nil && strings.Contains(g.Text(), why)
}
