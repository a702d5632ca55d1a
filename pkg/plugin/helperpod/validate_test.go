package helperpod

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestValidateImage(t *testing.T) {
	for _, tc := range []struct {
		ref  string
		want string // "" for valid, else a part of the error
	}{
		{"ghcr.io/kubectl-traceflow/traceflow-helper:v0.1.0", ""},
		{"ghcr.io/kubectl-traceflow/traceflow-helper@" + digest, ""},
		{"ghcr.io/kubectl-traceflow/traceflow-helper:v0.1.0@" + digest, ""},
		{"registry.local:5000/tf/helper:dev", ""},
		{"helper", ""},
		{"", "empty"},
		{"ghcr.io/x/helper@sha256:abc", "64 lowercase hex digits"},
		{"ghcr.io/x/helper@" + strings.ToUpper(digest), "64 lowercase hex digits"},
		{"ghcr.io/x/Helper:v1", "not an image reference"},
		{"ghcr.io/x/helper:v1 --privileged", "not an image reference"},
		{"ghcr.io/x/helper:", "not an image reference"},
	} {
		err := ValidateImage(tc.ref)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidateImage(%q) = %v, want ok", tc.ref, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ValidateImage(%q) = %v, want an error with %q", tc.ref, err, tc.want)
		}
	}
}

func TestValidateRunDir(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want string
	}{
		{"/var/run/openvswitch", ""},
		{"/run/openvswitch", ""},
		{"var/run/openvswitch", "not an absolute path"},
		{"/var/run/../../etc", "not a clean path: write /etc"},
		{"/var/run/openvswitch/", "not a clean path"},
		{"/", "cannot be /"},
		{"", "not an absolute path"},
	} {
		err := ValidateRunDir(tc.dir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidateRunDir(%q) = %v, want ok", tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ValidateRunDir(%q) = %v, want an error with %q", tc.dir, err, tc.want)
		}
	}
}

// A digest-pinned image reaches the pod as given; a bad run directory
// never reaches a hostPath.
func TestBuildImageDigestAndRunDir(t *testing.T) {
	p := params()
	p.Image = "ghcr.io/kubectl-traceflow/traceflow-helper@" + digest
	pod, err := Build(p)
	if err != nil || pod.Spec.Containers[0].Image != p.Image {
		t.Fatalf("digest image: %v", err)
	}
	p.OVSRunDir = "/var/run/../../"
	if _, err := Build(p); err == nil {
		t.Error("Build accepted an unclean run directory")
	}
}

func TestResourcesAndReadOnlyMount(t *testing.T) {
	pod, err := Build(params())
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("a CPU limit would throttle the helper's packet-in reads")
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %v: want requests and a memory limit", c.Resources)
	}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.MountPath)
		}
	}
}

func FuzzValidateImage(f *testing.F) {
	for _, s := range []string{"ghcr.io/a/b:v1", "a@" + digest, "x:1/y", "@", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateImage(s) == nil && (strings.ContainsAny(s, " \t\n\x00") || s == "") {
			t.Errorf("accepted %q", s)
		}
	})
}
