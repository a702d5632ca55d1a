package report

import (
	"slices"
	"testing"
	"time"
)

// --reply-translated goes through the command line as the plugin writes it
// for a round trip's sender and the helper reads it, after the source's
// flags and before the addresses; left out, it writes nothing and reads
// back false. A receive has no probe: the flag is not its own.
func TestHelperArgsReplyTranslated(t *testing.T) {
	sender := func(on bool) HelperArgs {
		return HelperArgs{Subcommand: SubcommandTrace, OVSRunDir: "/var/run/openvswitch", Bridge: "br-int", Tag: 7, Timeout: 20 * time.Second,
			Mark: 703710, ReplyTag: 8, Probe: ProbeArgs{SourcePod: "default/pod-a", ReplyTranslated: on, SourceIP: "10.244.1.5", Destination: "1.1.1.1", TCP: 443}}
	}
	common := []string{"trace", "--ovs-rundir", "/var/run/openvswitch", "--bridge", "br-int", "--tag", "7", "--timeout", "20s",
		"--mark", "703710", "--reply-tag", "8", "--source-pod", "default/pod-a"}
	addrs := []string{"--source-ip", "10.244.1.5", "--destination", "1.1.1.1", "--tcp", "443"}
	for _, tc := range []struct {
		name string
		a    HelperArgs
		want []string
	}{
		{"a round trip out of the pod network", sender(true), slices.Concat(common, []string{"--reply-translated"}, addrs)},
		{"without", sender(false), slices.Concat(common, addrs)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argsRoundTrip(t, tc.a, tc.want)
		})
	}
	senderOnly(t, sender(true), "--reply-translated")
	if got, err := Parse([]string{"trace", "--reply-translated=false", "--destination", "1.1.1.1"}); err != nil || got.Probe.ReplyTranslated {
		t.Errorf("--reply-translated=false: Parse = %+v, %v; want ReplyTranslated false", got.Probe, err)
	}
}
