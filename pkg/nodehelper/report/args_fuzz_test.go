package report

import (
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// builtArgs is a HelperArgs made of fuzz inputs: its strings from words,
// its numbers from n, which fields are given from given. A receive gets
// no probe: it has no such flags.
func builtArgs(words []string, n uint64, given uint32) HelperArgs {
	i := 0
	word := func() string {
		i++
		if given&(1<<(i%32)) == 0 {
			return ""
		}
		return words[i%len(words)]
	}
	num := func() uint {
		i++
		return uint(bits.RotateLeft64(n, i*11))
	}
	set := func() bool {
		i++
		return given&(1<<(i%32)) != 0
	}
	a := HelperArgs{
		Subcommand: SubcommandReceive, OVSRunDir: words[0], Bridge: words[len(words)-1], Node: word(),
		Timeout: time.Duration(bits.RotateLeft64(n, 7)), Tag: num(), Mark: num(),
		AntreaAgent: word(), AntreaToken: word(), StartOnStdin: set(),
	}
	if given&(1<<31) == 0 {
		return a
	}
	a.Subcommand = SubcommandTrace
	a.Probe = ProbeArgs{
		SourcePod: word(), InPort: word(), SourceIP: word(), SourceMAC: word(), Destination: word(), DestinationMAC: word(),
		TCP: num(), UDP: num(), ICMP: set(), SourcePort: num(),
	}
	if set() {
		a.Probe.TCPFlags = uintp(num())
	}
	if set() {
		a.Probe.TTL = uintp(num())
	}
	return a
}

// FuzzHelperArgsRoundTrip holds the plugin's and the helper's halves of the
// contract together: a value the plugin builds reads back as itself, and a
// command line that parses (args split at NUL, as no argv holds one) is
// written back into one that parses into the same value.
func FuzzHelperArgsRoundTrip(f *testing.F) {
	f.Add("receive\x00--ovs-rundir\x00/var/run/openvswitch\x00--bridge\x00br-int\x00--tag\x005\x00--timeout\x0020s\x00--mark\x001234", uint64(5), uint32(0))
	f.Add("trace\x00--in-port\x00p1\x00--destination\x00fd00::7\x00--udp\x0053\x00--tcp-flags\x000", uint64(1<<40|53), ^uint32(0))
	f.Fuzz(func(t *testing.T, cmdline string, n uint64, given uint32) {
		words := strings.Split(cmdline, "\x00")
		a := builtArgs(words, n, given)
		got, err := Parse(a.Args())
		if err != nil {
			t.Fatalf("Parse(%q) of a built value: %v", a.Args(), err)
		}
		if d := cmp.Diff(a, got); d != "" {
			t.Fatalf("Parse(%q) (-built +parsed):\n%s", a.Args(), d)
		}

		parsed, err := Parse(words)
		if err != nil {
			return
		}
		again, err := Parse(parsed.Args())
		if err != nil {
			t.Fatalf("%q parsed, its Args() %q did not: %v", words, parsed.Args(), err)
		}
		if d := cmp.Diff(parsed, again); d != "" {
			t.Fatalf("%q and its Args() %q parse apart (-first +second):\n%s", words, parsed.Args(), d)
		}
	})
}
