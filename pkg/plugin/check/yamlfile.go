package check

// Reading a versioned YAML file through the node API, so that every error
// names the file, the line and the field: suite files here, and the
// matrix's expected files (pkg/plugin/matrix), which share the shape.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ReadDocument returns the one YAML document of file's data. An empty
// file is an error saying what the file needs (needs: "a suite needs
// apiVersion ..."); a second document one saying to put one what in each
// file; YAML syntax errors name their line.
func ReadDocument(file string, data []byte, needs, what string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Errorf(Pos{file, 1}, "", "the file is empty: %s", needs)
		}
		return nil, SyntaxError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Errorf(Pos{file, extra.Line}, "", "a second YAML document: put one %s in each file", what)
	} else if !errors.Is(err, io.EOF) {
		return nil, SyntaxError(file, err)
	}
	return &doc, nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// parserProblems are the YAML library's parser (not scanner) errors: for
// them it reports the 0-based line of the collection being parsed, which
// is one less than the line a reader counts.
var parserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator",
	"did not find expected key", "did not find expected node content", "found undefined tag handle",
}

// SyntaxError turns the YAML library's message ("yaml: line 4: mapping
// values are not allowed in this context") into file:line.
func SyntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimPrefix(strings.TrimPrefix(msg, m[0]), ": ")
		for _, p := range parserProblems {
			if msg == p {
				line++
				msg += " (in the collection that starts on this line)"
			}
		}
	}
	return Errorf(Pos{file, max(line, 1)}, "", "YAML syntax: %s", msg)
}

// Header reads a versioned file's top mapping: only the known fields, and
// apiVersion and kind present with the values this version reads. what
// names the file for the message of a missing one ("a suite").
func Header(doc *yaml.Node, errf ErrAt, apiVersion, kind, what string, known ...string) (root *yaml.Node, top map[string]*yaml.Node, err error) {
	root = doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if top, err = Fields(root, "", errf, known...); err != nil {
		return nil, nil, err
	}
	for _, f := range []struct{ key, want string }{{"apiVersion", apiVersion}, {"kind", kind}} {
		n, ok := top[f.key]
		if !ok {
			return nil, nil, errf(root, f.key, "missing: %s starts with apiVersion: %s and kind: %s", what, apiVersion, kind)
		}
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			return nil, nil, errf(n, f.key, "want a string, got %s", KindName(n))
		}
		if n.Value != f.want {
			return nil, nil, errf(n, f.key, "%q is not known; this version of kubectl traceflow reads %s", n.Value, f.want)
		}
	}
	return root, top, nil
}

// ErrAt makes the error of a field at a node; each reader's adds what it
// knows (check's the case's name).
type ErrAt func(n *yaml.Node, field, format string, a ...any) *Error

// Fields checks that n is a mapping with only the known keys, and returns
// each value by key; keys are matched exactly, as Kubernetes does. path
// is the mapping's own field ("" at the top).
func Fields(n *yaml.Node, path string, errf ErrAt, known ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, errf(n, path, "want a mapping of %s, got %s", strings.Join(known, ", "), KindName(n))
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ok := false
		for _, want := range known {
			ok = ok || k.Value == want
		}
		if !ok {
			return nil, errf(k, join(path, k.Value), "unknown field; %s takes %s", orTop(path), strings.Join(known, ", "))
		}
		if _, dup := out[k.Value]; dup {
			return nil, errf(k, join(path, k.Value), "given twice")
		}
		out[k.Value] = v
	}
	return out, nil
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

// KindName says what a node is, for an error that wanted something else.
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "something else"
}
