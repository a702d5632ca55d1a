package cli

import (
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// FuzzCommandLine feeds arbitrary SRC, DST and flags to the whole command
// against a fake cluster: it must never panic, never create anything, and
// end with a known exit code and a message.
func FuzzCommandLine(f *testing.F) {
	seeds := [][3]string{
		{"pod-a", "pod-b", "--tcp 80 --dry-run -o yaml"},
		{"pod-a", "svc/web", "--dry-run=client"},
		{"default/pod-a", "fd00:10:244:2::7", "--udp 53 --src-port 1 --ttl 255 --dry-run"},
		{"pod-a", "10.0.0.256", "--ipv6"},
		{"pod-a", "pod-b", "--tcp 80 --udp 53 --timeout 301s"},
		{"pod-a", "pod-b", "--tcp-flags 0x12 --tcp 443 --live --dropped-only -o json --dry-run"},
		{"x/pod/y", "demo/svc/web", "--engine helper --expect dropped --color never"},
		{"-n", "demo", "pod-c pod-b --keep"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	objs := demoCluster()
	f.Fuzz(func(t *testing.T, src, dst, flags string) {
		// --dry-run last, so that no input reaches a real trace against the
		// fake cluster (whose pods never run): parsing and resolution are
		// what is fuzzed.
		args := append(append([]string{src, dst}, strings.Fields(flags)...), "--dry-run")
		res := runCommand(t, args, objs...)
		if w := res.writes(); len(w) > 0 {
			t.Fatalf("%q created something: %v", args, w)
		}
		switch code := exitcode.Of(res.err); code {
		case exitcode.OK:
		case exitcode.Usage:
			if res.err.Error() == "" {
				t.Fatalf("%q: usage error without a message", args)
			}
		default:
			t.Fatalf("%q: exit code %d: %v", args, code, res.err)
		}
	})
}
