package check

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The JSON Schema documents exactly the fields the parser reads.
func TestSchemaMatchesTheParser(t *testing.T) {
	b, err := os.ReadFile("check-suite.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var s struct {
		object
		Defs map[string]object `json:"$defs"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	var defaults object
	if err := json.Unmarshal(s.Properties["defaults"], &defaults); err != nil {
		t.Fatal(err)
	}
	var version, kind struct {
		Const string `json:"const"`
	}
	_ = json.Unmarshal(s.Properties["apiVersion"], &version)
	_ = json.Unmarshal(s.Properties["kind"], &kind)
	if version.Const != APIVersion || kind.Const != Kind {
		t.Errorf("schema says %s %s, parser reads %s %s", version.Const, kind.Const, APIVersion, Kind)
	}
	for _, tc := range []struct {
		name   string
		schema object
		parser []string
	}{
		{"top level", s.object, fieldsTop}, {"defaults", defaults, fieldsDefaults},
		{"case", s.Defs["case"], fieldsCase}, {"from", s.Defs["from"], fieldsFrom}, {"to", s.Defs["to"], fieldsTo},
	} {
		var keys []string
		for k := range tc.schema.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := slices.Sorted(slices.Values(tc.parser))
		if !slices.Equal(keys, want) {
			t.Errorf("%s: schema has %v, parser reads %v", tc.name, keys, want)
		}
	}
}

// The example suite (the README's) parses.
func TestExampleParses(t *testing.T) {
	f := filepath.Join("testdata", "example.yaml")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(f, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Cases) != 5 {
		t.Errorf("%d cases, want 5", len(s.Cases))
	}
}

// The schema's oneOf of a source and of a destination lists exactly the
// kinds the parser takes one of.
func TestSchemaKindsMatchTheParser(t *testing.T) {
	b, err := os.ReadFile("check-suite.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Defs map[string]struct {
			OneOf []struct {
				Required []string `json:"required"`
			} `json:"oneOf"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	for _, tc := range []struct {
		def    string
		parser []string
	}{{"from", fromKinds}, {"to", toKinds}} {
		var kinds []string
		for _, o := range s.Defs[tc.def].OneOf {
			if len(o.Required) != 1 {
				t.Errorf("%s: a oneOf branch requires %v, want one kind", tc.def, o.Required)
				continue
			}
			kinds = append(kinds, o.Required[0])
		}
		if !slices.Equal(kinds, tc.parser) {
			t.Errorf("%s: schema's oneOf is %v, parser takes one of %v", tc.def, kinds, tc.parser)
		}
	}
}

// The suite of sources and destinations beyond pods parses: a node, a
// node's address, and an outside address to a NodePort and an externalIP.
func TestNodesExampleParses(t *testing.T) {
	f := filepath.Join("testdata", "nodes.yaml")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(f, b)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Cases {
		got = append(got, c.From.Node+c.From.IP+"/"+c.From.Via+" -> "+c.To.Node+c.To.IP+c.To.Selector)
	}
	want := []string{"worker-1/ -> app=api", "worker-1/ -> worker-2", "/ -> worker-2",
		"203.0.113.7/ -> worker-1", "203.0.113.7/worker-2 -> worker-2", "203.0.113.7/worker-2 -> 192.0.2.10"}
	if !slices.Equal(got, want) {
		t.Errorf("cases\n%q\nwant\n%q", got, want)
	}
}
