package report

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func uintp(v uint) *uint { return &v }

// receive5 is the receive command of FORMAT.md's serve example.
func receive5() HelperArgs {
	return HelperArgs{Subcommand: SubcommandReceive, OVSRunDir: "/var/run/openvswitch", Bridge: "br-int", Tag: 5, Timeout: 20 * time.Second, Mark: 1234}
}

// The command lines of FORMAT.md, of helperpod's golden pods and of the
// plugin's senders, read into the value the helper works from; where
// canonical is set, Args writes the value back in a different order.
func TestHelperArgs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		want      HelperArgs
		canonical []string
	}{{
		name: "serve's receive example",
		args: []string{"receive", "--ovs-rundir", "/var/run/openvswitch", "--bridge", "br-int", "--tag", "5", "--timeout", "20s", "--mark", "1234"},
		want: receive5(),
	}, {
		name: "serve's trace example, flags in another order and defaults left out",
		args: []string{"trace", "--ovs-rundir", "/var/run/openvswitch", "--bridge", "br-int", "--source-pod", "default/a", "--destination", "10.0.0.2", "--tag", "5"},
		want: HelperArgs{Subcommand: SubcommandTrace, OVSRunDir: "/var/run/openvswitch", Bridge: "br-int", Tag: 5, Timeout: 10 * time.Second,
			Probe: ProbeArgs{SourcePod: "default/a", Destination: "10.0.0.2"}},
		canonical: []string{"trace", "--ovs-rundir", "/var/run/openvswitch", "--bridge", "br-int", "--tag", "5", "--timeout", "10s",
			"--source-pod", "default/a", "--destination", "10.0.0.2"},
	}, {
		name: "helper pod's sender",
		args: []string{"trace", "--ovs-rundir", "/var/run/openvswitch", "--bridge", "br-int", "--tag", "7", "--timeout", "20s",
			"--source-pod", "default/pod-a", "--destination", "10.244.2.5", "--tcp", "80"},
		want: HelperArgs{Subcommand: SubcommandTrace, OVSRunDir: "/var/run/openvswitch", Bridge: "br-int", Tag: 7, Timeout: 20 * time.Second,
			Probe: ProbeArgs{SourcePod: "default/pod-a", Destination: "10.244.2.5", TCP: 80}},
	}, {
		name: "plugin's sender on a node with Antrea's agent, started by the plugin's go",
		args: []string{"trace", "--ovs-rundir", "/var/run/openvswitch", "--bridge", "br-int", "--tag", "7", "--timeout", "20s",
			"--antrea-agent", "127.0.0.1:10350", "--antrea-token", "/var/run/antrea/apiserver/loopback-client-token", "--mark", "703710", "--start-on-stdin",
			"--source-pod", "default/pod-a", "--source-ip", "10.244.1.5", "--destination", "10.244.2.7", "--tcp", "80", "--source-port", "40000",
			"--tcp-flags", "0", "--ttl", "64"},
		want: HelperArgs{Subcommand: SubcommandTrace, OVSRunDir: "/var/run/openvswitch", Bridge: "br-int", Tag: 7, Timeout: 20 * time.Second,
			AntreaAgent: "127.0.0.1:10350", AntreaToken: "/var/run/antrea/apiserver/loopback-client-token", Mark: 703710, StartOnStdin: true,
			Probe: ProbeArgs{SourcePod: "default/pod-a", SourceIP: "10.244.1.5", Destination: "10.244.2.7", TCP: 80, SourcePort: 40000,
				TCPFlags: uintp(0), TTL: uintp(64)}},
	}, {
		name: "every flag a trace has, values as flag reads them",
		args: []string{"trace", "--node", "n1", "--in-port", "p1", "--source-mac", "02:00:00:00:00:01", "--destination", "fd00::7",
			"--destination-mac", "02:00:00:00:00:02", "--udp=0x35", "--icmp", "--ttl", "2", "--inject-on-stdin", "--timeout", "1m30s"},
		want: HelperArgs{Subcommand: SubcommandTrace, OVSRunDir: "/var/run/openvswitch", Bridge: "br-int", Node: "n1", Timeout: 90 * time.Second, StartOnStdin: true,
			Probe: ProbeArgs{InPort: "p1", SourceMAC: "02:00:00:00:00:01", Destination: "fd00::7", DestinationMAC: "02:00:00:00:00:02",
				UDP: 53, ICMP: true, TTL: uintp(2)}},
		canonical: []string{"trace", "--ovs-rundir", "/var/run/openvswitch", "--bridge", "br-int", "--node", "n1", "--tag", "0", "--timeout", "1m30s",
			"--start-on-stdin", "--in-port", "p1", "--source-mac", "02:00:00:00:00:01", "--destination", "fd00::7",
			"--destination-mac", "02:00:00:00:00:02", "--udp", "53", "--icmp", "--ttl", "2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tc.args, d)
			}
			want := tc.canonical
			if want == nil {
				want = tc.args
			}
			if args := tc.want.Args(); !slices.Equal(args, want) {
				t.Errorf("Args()\n got %q\nwant %q", args, want)
			}
		})
	}
}

// A receive writes no probe flags, even where its value holds some.
func TestHelperArgsReceiveHasNoProbe(t *testing.T) {
	a := receive5()
	a.Probe = ProbeArgs{SourcePod: "default/a", TCPFlags: uintp(2)}
	if args := a.Args(); slices.Contains(args, "--source-pod") || slices.Contains(args, "--tcp-flags") {
		t.Errorf("a receive's Args() %q write a probe", args)
	}
}

// What a HelperArgs cannot hold is refused: a flag the subcommand does not
// have (a receive's probe flags, the older --inject-on-stdin included) or
// a value of the wrong type is a FlagError, as -h is, which the helper
// answers with its usage; an argument that is no flag is not.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		want     string
		flagErr  bool
		wantHelp bool
	}{
		{"no command line", nil, "want a trace or receive", false, false},
		{"serve", []string{"serve"}, "want a trace or receive", false, false},
		{"unknown flag", []string{"receive", "--tag", "5", "--frob"}, "flag provided but not defined: -frob", true, false},
		{"probe flag on a receive", []string{"receive", "--source-pod", "default/a"}, "flag provided but not defined: -source-pod", true, false},
		{"older name on a receive", []string{"receive", "--inject-on-stdin"}, "flag provided but not defined: -inject-on-stdin", true, false},
		{"not a number", []string{"trace", "--tcp", "http"}, `invalid value "http" for flag -tcp`, true, false},
		{"negative", []string{"trace", "--tag", "-1"}, `invalid value "-1" for flag -tag`, true, false},
		{"not a duration", []string{"receive", "--timeout", "20"}, `invalid value "20" for flag -timeout`, true, false},
		{"help", []string{"trace", "-h"}, "help requested", true, true},
		{"stray argument", []string{"trace", "--tag", "5", "extra"}, "unexpected arguments [extra]", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %+v, %v; want an error saying %q", tc.args, a, err, tc.want)
			}
			var fe *FlagError
			if errors.As(err, &fe) != tc.flagErr || errors.Is(err, flag.ErrHelp) != tc.wantHelp {
				t.Errorf("error %v: FlagError %v, ErrHelp %v; want %v, %v", err, errors.As(err, &fe), errors.Is(err, flag.ErrHelp), tc.flagErr, tc.wantHelp)
			}
			if d := cmp.Diff(HelperArgs{}, a); d != "" {
				t.Errorf("a refused command line gave a value:\n%s", d)
			}
		})
	}
}

// The helper's usage lists each subcommand's flags with their defaults.
func TestFlagSet(t *testing.T) {
	var b strings.Builder
	fs := FlagSet(SubcommandTrace)
	fs.SetOutput(&b)
	fs.PrintDefaults()
	for _, want := range []string{"-tcp-flags uint\n", "(default 2)", "(default 64)", `(default "/var/run/openvswitch")`, "(default 10s)", "-inject-on-stdin"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("trace's flags do not say %q:\n%s", want, b.String())
		}
	}
	if FlagSet(SubcommandReceive).Lookup("destination") != nil {
		t.Error("receive has a --destination flag")
	}
}
