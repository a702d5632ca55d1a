// Package ovsjson decodes the parts of OVSDB's JSON encoding that the lab's
// commands read from `ovsdb-client` output.
package ovsjson

import "encoding/json"

// Map decodes OVSDB's ["map", [[k, v], ...]] encoding; anything else gives
// an empty map.
func Map(raw json.RawMessage) map[string]string {
	var m []json.RawMessage
	out := map[string]string{}
	if json.Unmarshal(raw, &m) != nil || len(m) != 2 {
		return out
	}
	var pairs [][2]string
	if json.Unmarshal(m[1], &pairs) != nil {
		return out
	}
	for _, kv := range pairs {
		out[kv[0]] = kv[1]
	}
	return out
}
