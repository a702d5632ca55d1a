package report

import (
	"testing"
	"time"
)

// --source-outside goes through the command line as the plugin writes it
// and the helper reads it, in its place beside --source-node, before the
// addresses it needs; left out, it writes nothing and reads back false.
func TestHelperArgsSourceOutside(t *testing.T) {
	outside := func(on bool) HelperArgs {
		return HelperArgs{Subcommand: SubcommandTrace, OVSRunDir: "/var/run/openvswitch", Bridge: "br-int", Tag: 7, Timeout: 20 * time.Second,
			Probe: ProbeArgs{SourceOutside: on, SourceIP: "198.51.100.7", Destination: "172.18.0.3", TCP: 30080}}
	}
	for _, tc := range []struct {
		name string
		a    HelperArgs
		want []string
	}{
		{"from outside", outside(true), []string{"trace", "--ovs-rundir", "/var/run/openvswitch", "--bridge", "br-int", "--tag", "7", "--timeout", "20s",
			"--source-outside", "--source-ip", "198.51.100.7", "--destination", "172.18.0.3", "--tcp", "30080"}},
		{"not from outside", outside(false), []string{"trace", "--ovs-rundir", "/var/run/openvswitch", "--bridge", "br-int", "--tag", "7", "--timeout", "20s",
			"--source-ip", "198.51.100.7", "--destination", "172.18.0.3", "--tcp", "30080"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argsRoundTrip(t, tc.a, tc.want)
		})
	}
	// A receive has no probe: the flag is not its own.
	senderOnly(t, outside(true), "--source-outside")
}
