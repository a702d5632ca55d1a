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
