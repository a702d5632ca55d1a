package cli

import (
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/version"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tracerun"
)

func TestInstallDryRunPrintsWithoutConnecting(t *testing.T) {
	res := runCommand(t, []string{"install", "--dry-run", "--group", "sre"})
	if res.err != nil {
		t.Fatal(res.err)
	}
	objs, _ := install.Objects(install.Params{Groups: []string{"sre"}})
	want, _ := install.Manifest(objs)
	if res.stdout != string(want) {
		t.Errorf("install --dry-run printed something else than the manifest:\n%s", res.stdout)
	}
	if res.connected {
		t.Error("install --dry-run asked for cluster clients")
	}
}

func TestInstallThenUninstall(t *testing.T) {
	res := runCommand(t, []string{"install"})
	if res.err != nil {
		t.Fatal(res.err)
	}
	for _, want := range []string{"namespaces/traceflow-system created", "clusterroles.rbac.authorization.k8s.io/kubectl-traceflow created",
		"No one is bound to the roles yet"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("install output lacks %q:\n%s", want, res.stdout)
		}
	}
	res = runCommand(t, []string{"uninstall", "--dry-run"})
	if res.err != nil || res.stdout != "" { // a fresh fake cluster: nothing to remove
		t.Errorf("uninstall --dry-run on an empty cluster: %q %v", res.stdout, res.err)
	}
}

// A release stamps the pushed image's digest; the plugin then runs exactly
// that image by default, and says so.
func TestDefaultHelperImageIsTheStampedDigest(t *testing.T) {
	const ref = "ghcr.io/kubectl-traceflow/traceflow-helper:v1.2.3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	old := version.HelperImage
	version.HelperImage = ref
	defer func() { version.HelperImage = old }()
	if got := tracerun.DefaultHelperImage(); got != ref {
		t.Fatalf("default helper image %q, want the stamped %q", got, ref)
	}
	res := runCommand(t, []string{"version"})
	if !strings.Contains(res.stdout, "helper image: "+ref) {
		t.Errorf("version does not name the stamped image:\n%s", res.stdout)
	}
}
