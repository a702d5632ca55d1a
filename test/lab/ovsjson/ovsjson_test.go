package ovsjson

import (
	"encoding/json"
	"testing"
)

func TestMap(t *testing.T) {
	tests := []struct {
		name, raw string
		want      map[string]string
	}{
		{"pairs", `["map",[["pod-name","a"],["pod-namespace","ns"]]]`, map[string]string{"pod-name": "a", "pod-namespace": "ns"}},
		{"empty", `["map",[]]`, map[string]string{}},
		{"not a map", `"x"`, map[string]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Map(json.RawMessage(tc.raw))
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}
