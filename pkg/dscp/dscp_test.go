package dscp

import (
	"maps"
	"slices"
	"testing"
)

// The pool never meets Antrea's tags, the code points real traffic uses
// nor those of the kernel's ICMP errors, holds only DSCP values, and is exactly what is left of pools 2 and
// 3 after those (pool 1 is for standards assignment).
func TestPoolIsDisjointFromAntreaAndTraffic(t *testing.T) {
	p := Pool()
	antrea := map[uint8]bool{}
	for _, tag := range AntreaPool() {
		antrea[tag] = true
	}
	if len(antrea) != 14 || !antrea[7] || !antrea[59] || antrea[3] || antrea[63] {
		t.Fatalf("Antrea's pool %v, want 7..59 step 4", AntreaPool())
	}
	traffic := map[uint8]bool{}
	for _, c := range TrafficCodePoints {
		traffic[c] = true
	}
	for _, c := range []uint8{0, 1, 44, 45, 46, 8, 16, 24, 32, 40, 48, 56, 10, 12, 14, 18, 20, 22, 26, 28, 30, 34, 36, 38} {
		if !traffic[c] {
			t.Errorf("code point %d missing from TrafficCodePoints", c)
		}
	}
	icmp := map[uint8]bool{}
	for d := range uint8(64) {
		icmp[48|d&7] = true
	}
	if !slices.Equal(ICMPErrorCodePoints(), slices.Sorted(maps.Keys(icmp))) {
		t.Errorf("ICMPErrorCodePoints %v, want every 48 | d&7", ICMPErrorCodePoints())
	}
	var want []uint8
	for c := uint8(1); c <= 63; c++ {
		if c&1 == 1 && !antrea[c] && !traffic[c] && !icmp[c] {
			want = append(want, c)
		}
	}
	if !slices.Equal(p, want) {
		t.Errorf("pool %v, want %v", p, want)
	}
	seen := map[uint8]bool{}
	for _, tag := range p {
		if tag == 0 || tag > 63 || antrea[tag] || traffic[tag] || icmp[tag] || seen[tag] {
			t.Errorf("tag %d: zero, out of DSCP range, Antrea's, real traffic's, an ICMP error's or twice", tag)
		}
		seen[tag] = true
	}
	// Pool returns a copy: a caller cannot change what is allocated.
	p[0] = 7
	if Pool()[0] != 3 {
		t.Error("Pool shares its backing array")
	}
}
