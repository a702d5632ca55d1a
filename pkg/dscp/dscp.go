// Package dscp holds the DSCP values that tag a helper-mode trace's probe
// (the plugin allocates from them; the helper run by hand draws from them
// too), and why they are these.
package dscp

// The pool. A tag is a DSCP value (6 bits, 0..63) that the probe carries
// and every observation flow matches (with an ECN codepoint beside it where
// a run's traces share the value: tag.go), so a tag must never be a value
// that other packets on the same bridges carry at the same time:
//   - Antrea's own Traceflow controller allocates 7..59 in steps of 4
//     (AntreaPool) for its traces, and never sees our Leases: sharing that
//     range would let a helper trace and an Antrea trace carry one tag, each
//     engine's flows catching the other's probe. None of those is ours.
//   - Real traffic marks packets with standard code points; a helper trace
//     would catch any such packet matching the probe's 5-tuple (its random
//     source port makes that unlikely, not impossible) and, worse, the probe
//     would be queued as that class. So none of: 0 (CS0, default), 1 (LE,
//     lower effort, RFC 8622), 45 (NQB, non-queue-building), 46 (EF), 44 (VOICE-ADMIT,
//     RFC 5865), the class selectors CS1..CS7 (8, 16, ..., 56) or the AF
//     classes (10, 12, 14, 18, 20, 22, 26, 28, 30, 34, 36, 38).
//   - Linux answers a packet it cannot deliver (a UDP probe to a closed
//     port, any real datagram alike) with an ICMP error whose DSCP is CS6's
//     precedence with the packet's three low DSCP bits (icmp_send:
//     RT_TOS(tos) | IPTOS_PREC_INTERNETCONTROL), so 48 to 55 whatever the
//     packet carried: a probe tagged 9 is refused with DSCP 49. Were 49 a
//     tag, the flows of the trace holding it would take that error for
//     their probe. So none of ICMPErrorCodePoints either (measured on a real
//     kernel: TestIntegrationKernelICMPErrorsCarryNoTag; ICMPv6 errors carry
//     0).
//   - RFC 2474's pool 1 (xxxxx0) is for standards assignment: its free values
//     may be assigned any time, so we take none of them.
//
// What is left: pool 2 (xxxx11, experimental or local use) outside Antrea's
// range, 3 and 63, and pool 3 (xxxx01, local use that RFC 8436 opened to
// standards assignment) without its two assigned values, LE (1) and NQB
// (45), and without 49 and 53, which ICMP errors carry.
var pool = []uint8{3, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 57, 61, 63}

// Pool returns every tag a helper-mode trace may carry, in order.
func Pool() []uint8 { return append([]uint8(nil), pool...) }

// AntreaPool is the range Antrea's controller allocates its traces' tags
// from (7 to 59 in steps of 4): disjoint from Pool.
func AntreaPool() []uint8 {
	var p []uint8
	for t := 7; t <= 59; t += 4 {
		p = append(p, uint8(t))
	}
	return p
}

// TrafficCodePoints are the DSCP values real traffic uses, which no tag may
// be (see the pool above).
var TrafficCodePoints = []uint8{0, 1, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 44, 45, 46, 48, 56}

// ICMPErrorCodePoints are the DSCP values of the ICMP errors Linux sends
// (48 | the offending packet's DSCP & 7), which no tag may be (see the pool
// above).
func ICMPErrorCodePoints() []uint8 { return []uint8{48, 49, 50, 51, 52, 53, 54, 55} }
