package main

import (
	"net/netip"
	"strings"
	"testing"
)

func TestHostIfName(t *testing.T) {
	tests := []struct {
		name string
		e    env
		want string
	}{
		{"short pod name", env{podName: "pod-a", containerID: "abc"}, "poda-"},
		{"long pod name is cut", env{podName: "a-very-long-pod-name-indeed", containerID: "abc"}, "averylon-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := hostIfName(tc.e)
			if !strings.HasPrefix(got, tc.want) || len(got) > 15 {
				t.Errorf("hostIfName = %q, want prefix %q and at most 15 bytes", got, tc.want)
			}
			if got != hostIfName(tc.e) {
				t.Error("not deterministic: DEL must find the name ADD chose")
			}
		})
	}
	if hostIfName(env{podName: "p", containerID: "1"}) == hostIfName(env{podName: "p", containerID: "2"}) {
		t.Error("two sandboxes of one pod got the same interface name")
	}
}

func TestAllocateRelease(t *testing.T) {
	c := netConf{Gateway: "10.244.1.1", DataDir: t.TempDir()}
	prefix := netip.MustParsePrefix("10.244.1.0/30") // .1 gateway, .2 the only pod address, .3 broadcast
	a, err := allocate(c, "one", prefix)
	if err != nil || a.String() != "10.244.1.2" {
		t.Fatalf("first allocation: %v, %v", a, err)
	}
	if again, err := allocate(c, "one", prefix); err != nil || again != a {
		t.Errorf("a retried ADD should get its address back: %v, %v", again, err)
	}
	if _, err := allocate(c, "two", prefix); err == nil {
		t.Error("a full range should fail")
	}
	if err := release(c, "one"); err != nil {
		t.Fatal(err)
	}
	if b, err := allocate(c, "two", prefix); err != nil || b != a {
		t.Errorf("after release: %v, %v", b, err)
	}
}
