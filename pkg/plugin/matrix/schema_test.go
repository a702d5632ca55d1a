package matrix

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// The JSON Schema documents exactly the fields and the states the parser
// reads.
func TestSchemaMatchesTheParser(t *testing.T) {
	b, err := os.ReadFile("matrix.schema.json")
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
		{"top level", s.object, fieldsTop}, {"cell", s.Defs["cell"], fieldsCell},
	} {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range tc.schema.Properties {
				if !yield(k) {
					return
				}
			}
		})
		if want := slices.Sorted(slices.Values(tc.parser)); !slices.Equal(keys, want) {
			t.Errorf("%s: schema has %v, parser reads %v", tc.name, keys, want)
		}
	}
	var expect struct {
		Enum []string `json:"enum"`
	}
	if err := json.Unmarshal(s.Defs["cell"].Properties["expect"], &expect); err != nil {
		t.Fatal(err)
	}
	var states []string
	for st := Delivered; st <= Incomplete; st++ {
		states = append(states, st.String())
	}
	if !slices.Equal(expect.Enum, states) {
		t.Errorf("schema's expect is %v, parser reads %v", expect.Enum, states)
	}
}
