package matrix

// An expected-matrix file says, cell by cell, how a namespace's traces
// should end, so that `kubectl traceflow matrix` can fail CI when one
// changes. matrix.schema.json documents it:
//
//	apiVersion: traceflow.kubectl-traceflow.io/v1alpha1
//	kind: ConnectivityMatrix
//	namespace: demo            # optional: the run's namespace must be this one
//	cells:
//	- {from: client-a, to: web-1, port: tcp/80, expect: delivered}
//	- {from: client-a, to: web-1, port: tcp/8080, expect: dropped}
//
// from and to are pod names of the namespace; port is as ParsePort reads
// it; expect is delivered, dropped, refused or incomplete. Each cell is
// listed at most once, and a pod is not its own destination. It is read,
// as check's suite files are, through the YAML node API, which keeps the
// line of every field for errors of the form file:line: field: message.

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
)

// The version and kind an expected-matrix file declares.
const (
	APIVersion = "traceflow.kubectl-traceflow.io/v1alpha1"
	Kind       = "ConnectivityMatrix"
)

// The fields each mapping takes; matrix.schema.json documents the same (a
// test keeps them in step).
var (
	fieldsTop  = []string{"apiVersion", "kind", "namespace", "cells"}
	fieldsCell = []string{"from", "to", "port", "expect"}
)

// Expected is one expected-matrix file.
type Expected struct {
	File string
	// Namespace is "" when the file names none.
	Namespace string
	Cells     map[Cell]Want
	// Order is the cells in the file's order.
	Order []Cell
	// namespaceAt is where namespace was written; podsAt where each
	// cell's from and to were, for errors that name a pod.
	namespaceAt check.Pos
	podsAt      map[Cell][2]check.Pos
}

// Want is one cell's expected state and where the file says so.
type Want struct {
	State State
	At    check.Pos
}

// ParseExpected reads an expected-matrix file; the first problem found is
// returned as a *check.Error naming file:line and the field.
func ParseExpected(file string, data []byte) (*Expected, error) {
	doc, err := check.ReadDocument(file, data, fmt.Sprintf("an expected matrix needs apiVersion %s, kind %s and cells", APIVersion, Kind), "matrix")
	if err != nil {
		return nil, err
	}
	p := &parser{file: file}
	return p.expected(doc)
}

type parser struct{ file string }

func (p *parser) at(n *yaml.Node) check.Pos { return check.Pos{File: p.file, Line: n.Line} }

func (p *parser) errf(n *yaml.Node, field, format string, a ...any) *check.Error {
	return check.Errorf(p.at(n), field, format, a...)
}

func (p *parser) fields(n *yaml.Node, path string, known ...string) (map[string]*yaml.Node, error) {
	return check.Fields(n, path, p.errf, known...)
}

// scalar reads a scalar's text, whatever YAML type it resolves to (a pod
// may be named 123), but not null: `from:` left empty names no pod.
func (p *parser) scalar(n *yaml.Node, field, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errf(n, field, "want %s, got %s", what, check.KindName(n))
	}
	return n.Value, nil
}

func (p *parser) expected(doc *yaml.Node) (*Expected, error) {
	root, top, err := check.Header(doc, p.errf, APIVersion, Kind, "an expected matrix", fieldsTop...)
	if err != nil {
		return nil, err
	}
	e := &Expected{File: p.file, Cells: map[Cell]Want{}, podsAt: map[Cell][2]check.Pos{}}
	if n, ok := top["namespace"]; ok {
		v, err := p.scalar(n, "namespace", "a namespace name")
		if err != nil {
			return nil, err
		}
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			return nil, p.errf(n, "namespace", "%q is not a namespace name: %s", v, errs[0])
		}
		e.Namespace, e.namespaceAt = v, p.at(n)
	}
	cells, ok := top["cells"]
	if !ok {
		return nil, p.errf(root, "cells", "missing: list the cells, one {from, to, port, expect} each")
	}
	if cells.Kind != yaml.SequenceNode {
		return nil, p.errf(cells, "cells", "want a list of cells, got %s", check.KindName(cells))
	}
	for i, n := range cells.Content {
		if err := p.cell(e, n, fmt.Sprintf("cells[%d]", i)); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// cell reads one cell into e.
func (p *parser) cell(e *Expected, n *yaml.Node, path string) error {
	f, err := p.fields(n, path, fieldsCell...)
	if err != nil {
		return err
	}
	for _, k := range fieldsCell {
		if _, ok := f[k]; !ok {
			return p.errf(n, path+"."+k, "missing: every cell names from, to, port and expect")
		}
	}
	var c Cell
	if c.From, err = p.pod(f["from"], path+".from"); err != nil {
		return err
	}
	if c.To, err = p.pod(f["to"], path+".to"); err != nil {
		return err
	}
	if c.From == c.To {
		return p.errf(f["to"], path+".to", "%s is also from: a pod is not its own destination", c.To)
	}
	port, err := p.scalar(f["port"], path+".port", "a port such as tcp/80")
	if err != nil {
		return err
	}
	if c.Port, err = ParsePort(port); err != nil {
		return p.errf(f["port"], path+".port", "%s", err)
	}
	want, err := p.state(f["expect"], path+".expect")
	if err != nil {
		return err
	}
	if first, dup := e.Cells[c]; dup {
		return p.errf(n, path, "%s is already listed at line %d: list each cell once", c, first.At.Line)
	}
	e.Cells[c] = Want{State: want, At: p.at(n)}
	e.Order = append(e.Order, c)
	e.podsAt[c] = [2]check.Pos{p.at(f["from"]), p.at(f["to"])}
	return nil
}

// pod reads a pod name: a DNS-1123 subdomain, as the API server requires.
func (p *parser) pod(n *yaml.Node, field string) (string, error) {
	v, err := p.scalar(n, field, "a pod name")
	if err != nil {
		return "", err
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return "", p.errf(n, field, "%q is not a pod name: %s", v, errs[0])
	}
	return v, nil
}

// state reads expect: how a trace ended, so not pending or running.
func (p *parser) state(n *yaml.Node, field string) (State, error) {
	v, err := p.scalar(n, field, "delivered, dropped, refused or incomplete")
	if err != nil {
		return 0, err
	}
	for s := Delivered; s <= Incomplete; s++ {
		if strings.EqualFold(v, s.String()) {
			return s, nil
		}
	}
	return 0, p.errf(n, field, "%q is not a state a trace ends in: give delivered, dropped, refused or incomplete", v)
}
