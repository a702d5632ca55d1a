package report

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// argsRoundTrip checks that a's Args() are want and parse back into a.
func argsRoundTrip(t *testing.T, a HelperArgs, want []string) {
	t.Helper()
	args := a.Args()
	if !slices.Equal(args, want) {
		t.Errorf("Args()\n got %q\nwant %q", args, want)
	}
	got, err := Parse(args)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a, got); d != "" {
		t.Errorf("Parse(Args()) (-want +got):\n%s", d)
	}
}

// senderOnly checks that flag, which a (a sender's arguments) writes, is
// the sender's alone: a receive neither writes nor accepts it.
func senderOnly(t *testing.T, a HelperArgs, flag string) {
	t.Helper()
	if !slices.Contains(a.Args(), flag) {
		t.Fatalf("the sender's Args() %q do not write %s", a.Args(), flag)
	}
	a.Subcommand = SubcommandReceive
	if slices.Contains(a.Args(), flag) {
		t.Errorf("a receive's Args() %q write %s", a.Args(), flag)
	}
	if _, err := Parse([]string{"receive", flag}); err == nil {
		t.Errorf("a receive accepts %s", flag)
	}
}
