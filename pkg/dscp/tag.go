package dscp

import "fmt"

// A tag tells one trace's probe from every other packet on the bridges: a
// DSCP value from the pool, and where traces of one run share that DSCP
// value, an ECN codepoint beside it. The observation flows match both
// fields, and the probe carries both.
//
// Why ECN: a run holds each DSCP value it uses as a Lease, so no other
// plugin's trace carries it; within the run, the ECN codepoint tells up to
// three traces apart, which lifts a run's bound from the pool's 14 traces
// at once to 42. What else a probe carries per trace, its mark (the IPv4
// identification, the IPv6 flow label), would tell any number apart, but
// OpenFlow has no field for the IPv4 identification: no flow can match it,
// and a flow copy that two traces install with one match is one flow to
// OVS, the later replacing the earlier. ECN is what is left of the same
// byte: no Kubernetes network pipeline (Antrea's, OVN's), NetworkPolicy or
// kernel route looks at it, and a queue that marks congestion rewrites it
// to CE (3), which no tag uses, so a probe marked on its way is no longer
// seen by any trace (it ends without a verdict) rather than taken for
// another's. The probe stays Not-ECT where it holds the DSCP alone. Linux's
// ICMP errors keep a packet's ECT(0) bit (IPv4; measured for every TOS byte
// by TestIntegrationKernelICMPErrorsCarryNoTag), but their DSCP, 48 to 55,
// is no tag's.
//
// The encoding: DSCP + 64 × ECN, so a tag below 64 is a DSCP value alone
// (ECN 0, Not-ECT), 64 + d is d with ECT(1) and 128 + d is d with ECT(0).
// Every flow of a trace matches the ECN codepoint too, so the flows of the
// tag d (ECN 0) never take a probe of 64 + d for theirs.

// ECNVariants is how many traces can share one DSCP value: ECN 0, 1 and 2
// (Not-ECT, ECT(1), ECT(0)); CE (3) is never a tag.
const ECNVariants = 3

// Tag builds the tag of DSCP value d with ECN codepoint ecn (0..2).
func Tag(d, ecn uint8) uint8 { return d&0x3f | ecn<<6 }

// Value is the DSCP value of a tag.
func Value(tag uint8) uint8 { return tag & 0x3f }

// ECN is the ECN codepoint of a tag.
func ECN(tag uint8) uint8 { return tag >> 6 }

// TOS is the IPv4 TOS byte (the IPv6 traffic class) a probe with the tag
// carries: its DSCP value, then its ECN codepoint.
func TOS(tag uint8) uint8 { return Value(tag)<<2 | ECN(tag) }

// FromTOS is the tag a TOS byte (an IPv6 traffic class) stands for; CE
// gives a value no tag has (ValidTag false).
func FromTOS(tos uint8) uint8 { return tos>>2 | (tos&3)<<6 }

// ValidTag reports whether tag is a DSCP value 1..63 with ECN 0..2.
func ValidTag(tag uint8) bool { return Value(tag) != 0 && ECN(tag) < ECNVariants }

// TagRange says what a valid tag is, for error messages.
const TagRange = "1..63 (a DSCP value), plus 64 or 128 for the same value with ECN ECT(1) or ECT(0)"

// Name writes a tag for people: its DSCP value, and its ECN codepoint
// where it has one ("9", "9+ECT(1)").
func Name(tag uint8) string {
	switch ECN(tag) {
	case 0:
		return fmt.Sprint(Value(tag))
	case 1:
		return fmt.Sprintf("%d+ECT(1)", Value(tag))
	case 2:
		return fmt.Sprintf("%d+ECT(0)", Value(tag))
	}
	return fmt.Sprintf("%d+CE", Value(tag))
}
