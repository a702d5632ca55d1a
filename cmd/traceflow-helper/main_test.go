package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
)

// TestMain lets integration tests run this binary as the helper: with
// TRACEFLOW_HELPER_MAIN=1 the test binary is traceflow-helper.
func TestMain(m *testing.M) {
	if os.Getenv("TRACEFLOW_HELPER_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

func TestUsageErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no command":          {nil, "Usage:"},
		"unknown command":     {[]string{"frobnicate"}, "unknown command"},
		"receive no tag":      {[]string{"receive"}, "--tag is required"},
		"tag out of range":    {[]string{"receive", "--tag", "64"}, "out of range"},
		"no source":           {[]string{"trace", "--destination", "10.0.0.1"}, "exactly one of --source-pod"},
		"two protocols":       {[]string{"trace", "--in-port", "p", "--destination", "10.0.0.1", "--udp", "53", "--icmp"}, "at most one"},
		"bad destination":     {[]string{"trace", "--in-port", "p", "--destination", "nope"}, "want an IP address"},
		"bad timeout":         {[]string{"trace", "--in-port", "p", "--destination", "10.0.0.1", "--timeout", "0s"}, "out of range"},
		"stray argument":      {[]string{"trace", "extra"}, "unexpected arguments"},
		"bad destination mac": {[]string{"trace", "--in-port", "p", "--destination", "10.0.0.1", "--destination-mac", "zz"}, "--destination-mac"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), tc.args, nil, &out, &errb); code != 1 {
				t.Fatalf("exit code %d, want 1 (stderr %q)", code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q does not say %q", errb.String(), tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing on a usage error", out.String())
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "traceflow-helper receive") {
		t.Fatalf("--help: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"version"}, nil, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "traceflow-helper ") {
		t.Fatalf("version: exit %d, %q", code, out.String())
	}
}

func TestSetupErrorIsJSONAndExit4(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"receive", "--tag", "5", "--ovs-rundir", t.TempDir()}, nil, &out, &errb)
	if code != 4 {
		t.Fatalf("exit code %d, want 4; stderr %q", code, errb.String())
	}
	if !strings.Contains(out.String(), `"type":"error"`) || !strings.Contains(out.String(), `"code":"setup"`) {
		t.Errorf("stdout %q lacks a setup error line", out.String())
	}
}

func TestWaitForGo(t *testing.T) {
	if err := watchInput(strings.NewReader("go\n")).waitForGo(context.Background()); err != nil {
		t.Fatalf("a line on stdin is the go: %v", err)
	}
	err := watchInput(strings.NewReader("")).waitForGo(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not starting") {
		t.Fatalf("end of input before go must refuse to start, got %v", err)
	}
	if err := watchInput(nil).waitForGo(context.Background()); err == nil || !strings.Contains(err.Error(), "needs a standard input") {
		t.Fatalf("no standard input at all: got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, w := io.Pipe()
	defer w.Close()
	if err := watchInput(r).waitForGo(ctx); err == nil {
		t.Fatal("a cancelled wait returned no error")
	}
}

// After its last line a helper waits for the plugin to end its input (the
// plugin has read the report), and no longer than its limit: an attach
// may lose what a container writes just before it exits.
func TestWaitForEndOfInput(t *testing.T) {
	r, w := io.Pipe()
	in := watchInput(r)
	go func() { _, _ = w.Write([]byte("go\n")) }()
	if err := in.waitForGo(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		in.waitForEnd(time.Minute)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("returned while the input was still open")
	case <-time.After(50 * time.Millisecond):
	}
	_ = w.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("did not return once the input ended")
	}

	// A plugin that never ends the input: the limit.
	r2, w2 := io.Pipe()
	defer w2.Close()
	in = watchInput(r2)
	go func() { _, _ = w2.Write([]byte("go\n")) }()
	if err := in.waitForGo(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	in.waitForEnd(100 * time.Millisecond)
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("returned after %s, before its limit, with the input open", took)
	}
}

// A helper told to wait for the plugin's word does nothing when its input
// ends first: the sender under either flag name, and a receiver.
func TestStartOnStdinRefusesWithoutGo(t *testing.T) {
	for _, args := range [][]string{
		{"trace", "--inject-on-stdin", "--source-pod", "default/a", "--destination", "10.0.0.1"},
		{"trace", "--start-on-stdin", "--source-pod", "default/a", "--destination", "10.0.0.1"},
		{"receive", "--start-on-stdin", "--tag", "5"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "--ovs-rundir", t.TempDir()), strings.NewReader(""), &out, &errb)
		if code != 4 || !strings.Contains(out.String(), `"type":"error"`) || !strings.Contains(out.String(), "not starting") ||
			strings.Contains(out.String(), `"type":"ready"`) {
			t.Errorf("%v: exit %d, stdout %q", args, code, out.String())
		}
	}
}

// Without --tag, trace draws its tag from the helper's pool: 256 draws
// (a byte's worth) give only pool values, and more than one of them.
func TestDefaultTagFromThePool(t *testing.T) {
	seen := map[uint8]bool{}
	for range 256 {
		o := newOptions("trace", io.Discard)
		if err := o.parse([]string{"--in-port", "p", "--destination", "10.0.0.1"}); err != nil {
			t.Fatal(err)
		}
		tag := uint8(o.tag) //nolint:gosec // checked <= 63 by parse
		if !slices.Contains(dscp.Pool(), tag) {
			t.Fatalf("default tag %d is not in the helper's pool %v", tag, dscp.Pool())
		}
		seen[tag] = true
	}
	if len(seen) < 2 {
		t.Errorf("256 default tags were all %v", seen)
	}
}

// Parsing writes nothing, so the helper itself says what flag.FlagSet
// says of a command line it refuses or of -h: the error, then the
// subcommand's flags with this node's defaults, before its own line.
func TestFlagErrorsPrintTheUsage(t *testing.T) {
	t.Setenv("NODE_NAME", "node-x")
	for _, tc := range []struct {
		args       []string
		code       int
		start, end string
	}{
		{[]string{"trace", "-h"}, 0, "Usage of trace:\n", "\n"},
		{[]string{"receive", "--frob"}, 1, "flag provided but not defined: -frob\nUsage of receive:\n", "traceflow-helper receive: flag provided but not defined: -frob\n"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, nil, &out, &errb)
		s := errb.String()
		if code != tc.code || !strings.HasPrefix(s, tc.start) || !strings.HasSuffix(s, tc.end) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d, stderr from %q to %q", tc.args, code, out.String(), s, tc.code, tc.start, tc.end)
		}
		for _, want := range []string{`(default "node-x")`, `(default "/var/run/antrea/apiserver/loopback-client-token")`, `(default "/var/run/openvswitch")`} {
			if !strings.Contains(s, want) {
				t.Errorf("%v: the usage does not say %s:\n%s", tc.args, want, s)
			}
		}
	}
}
