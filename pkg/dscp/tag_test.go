package dscp

import "testing"

// A tag's DSCP and ECN parts go into the TOS byte and come back from it,
// and no tag carries CE.
func TestTagRoundTripsThroughTOS(t *testing.T) {
	seen := map[uint8]bool{}
	for _, d := range Pool() {
		for ecn := uint8(0); ecn < ECNVariants; ecn++ {
			tag := Tag(d, ecn)
			if !ValidTag(tag) || Value(tag) != d || ECN(tag) != ecn {
				t.Fatalf("Tag(%d, %d) = %d: valid %v, DSCP %d, ECN %d", d, ecn, tag, ValidTag(tag), Value(tag), ECN(tag))
			}
			if seen[tag] {
				t.Fatalf("Tag(%d, %d) = %d twice", d, ecn, tag)
			}
			seen[tag] = true
			tos := TOS(tag)
			if tos>>2 != d || tos&3 != ecn || FromTOS(tos) != tag {
				t.Fatalf("TOS(%d) = %#x, back %d", tag, tos, FromTOS(tos))
			}
		}
		if ValidTag(Tag(d, 3)) || ValidTag(FromTOS(d<<2|3)) {
			t.Errorf("DSCP %d with CE is a valid tag", d)
		}
	}
	if ValidTag(0) || ValidTag(64) || ValidTag(128) {
		t.Error("a tag without a DSCP value is valid")
	}
	if Name(9) != "9" || Name(Tag(9, 1)) != "9+ECT(1)" || Name(Tag(9, 2)) != "9+ECT(0)" {
		t.Errorf("names %q %q %q", Name(9), Name(Tag(9, 1)), Name(Tag(9, 2)))
	}
}
