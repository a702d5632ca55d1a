//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Done-when 4: lab-up is idempotent: run again on a running lab, it keeps
// it. How long a warm lab-up takes is reported here, not asserted (a slow
// machine is no failure); `make bench-e2e` measures it.
func TestLabUpWarmAndIdempotent(t *testing.T) {
	requireLab(t)
	if lab.reused {
		t.Logf("lab was already up; lab.sh up on it took %s", lab.upDuration.Round(time.Millisecond))
	} else {
		t.Logf("warm lab.sh up took %s", lab.upDuration.Round(time.Millisecond))
	}
	if want := "export KUBECONFIG=" + filepath.Join(stateDir(), "kubeconfig"); !strings.Contains(lab.upOutput, want) {
		t.Errorf("lab.sh up output lacks %q:\n%s", want, lab.upOutput)
	}
	before := nodeUIDs(t)
	start := time.Now()
	out, err := exec.Command(labScript(), "up").CombinedOutput()
	if err != nil {
		t.Fatalf("second lab.sh up: %v\n%s", err, out)
	}
	t.Logf("lab.sh up on a running lab took %s", time.Since(start).Round(time.Millisecond))
	if after := nodeUIDs(t); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("second lab.sh up replaced the nodes: %v -> %v", before, after)
	}
	if err := exec.Command(labScript(), "status").Run(); err != nil {
		t.Errorf("lab.sh status after a second up: %v", err)
	}
}

func nodeUIDs(t testing.TB) []string {
	t.Helper()
	var l corev1.NodeList
	if err := json.Unmarshal([]byte(mustKubectl(t, "get", "nodes", "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, n := range l.Items {
		uids = append(uids, string(n.UID))
	}
	return uids
}

// Done-when 1: kubectl get nodes shows two Ready nodes, with the lab's node
// IPs and pod CIDRs.
func TestTwoReadyNodes(t *testing.T) {
	requireLab(t)
	var l corev1.NodeList
	if err := json.Unmarshal([]byte(mustKubectl(t, "get", "nodes", "-o", "json")), &l); err != nil {
		t.Fatal(err)
	}
	got := map[string]corev1.Node{}
	for _, n := range l.Items {
		got[n.Name] = n
	}
	subnets := map[netip.Prefix]string{}
	for _, want := range labNodes {
		n, ok := got[want.name]
		if !ok {
			t.Errorf("node %s missing (have %d nodes)", want.name, len(l.Items))
			continue
		}
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			t.Errorf("node %s is not Ready", want.name)
		}
		// Lab mode gives the Node its pod CIDR; OVN mode, as OVN-Kubernetes,
		// the annotation its controller allocates node subnets from; the
		// genuine OVN-Kubernetes chooses them itself (nodeSubnet).
		cidr := n.Spec.PodCIDR
		if a := modeRow(labMode()).subnetAnnotation; a != "" {
			cidr = n.Annotations[a]
			want.podCIDR = `{"default":["` + want.podCIDR + `"]}`
		}
		if modeRow(labMode()).allocatesSubnets {
			s, err := annotatedSubnet(n)
			if err != nil || s.Bits() != 24 || !podRange.Contains(s.Addr()) || subnets[s] != "" {
				t.Errorf("node %s subnet %q (%v): want a /24 of %s no other node has (%v)", want.name, cidr, err, podRange, subnets)
			}
			subnets[s] = want.name
		} else if cidr != want.podCIDR {
			t.Errorf("node %s pod CIDR %q, want %q", want.name, cidr, want.podCIDR)
		}
		ipOK := false
		for _, a := range n.Status.Addresses {
			ipOK = ipOK || (a.Type == corev1.NodeInternalIP && a.Address == want.ip)
		}
		if !ipOK {
			t.Errorf("node %s addresses %v, want InternalIP %s", want.name, n.Status.Addresses, want.ip)
		}
	}
}

// The helper, pause and workload images are in every node's containerd.
func TestImagesOnEveryNode(t *testing.T) {
	requireLab(t)
	helper, err := os.ReadFile(filepath.Join(stateDir(), "helper-image"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range labNodes {
		out := nodeExec(t, n.name, "ctr", "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "ls", "-q")
		for _, img := range []string{strings.TrimSpace(string(helper)), workloadImage, "ghcr.io/kubectl-traceflow/lab-pause:v1"} {
			if !strings.Contains(out, img+"\n") {
				t.Errorf("image %s not on %s:\n%s", img, n.name, out)
			}
		}
	}
}

// The built plugin runs through the real kubectl's plugin mechanism.
func TestPluginRunsThroughKubectl(t *testing.T) {
	requireLab(t)
	out := mustKubectl(t, "plugin", "list")
	if !strings.Contains(out, filepath.Join(repoRoot(), "bin", "kubectl-traceflow")) {
		t.Errorf("kubectl plugin list does not show bin/kubectl-traceflow:\n%s", out)
	}
	mustKubectl(t, "traceflow", "--help")
}

// A watch without a resourceVersion (client-go's plain Watch, as the plugin
// uses for its helper pods) stays open: with etcd 3.4 it needs etcd's
// periodic progress notifications, or kube-apiserver closes it after 3 s
// with "Too large resource version".
func TestWatchWithoutResourceVersionStaysOpen(t *testing.T) {
	requireLab(t)
	mustKubectl(t, "create", "configmap", "-n", "default", fmt.Sprintf("e2e-bump-%d", time.Now().UnixNano()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := kubectl(ctx, "get", "--raw", "/api/v1/namespaces/default/pods?watch=1&labelSelector=e2e%3Dnothing")
	if ctx.Err() == nil {
		t.Fatalf("the watch ended within 5s: %q, %v", out, err)
	}
	if strings.Contains(out, `"ERROR"`) {
		t.Errorf("the watch reported an error: %s", out)
	}
}

// podRange is the lab's pod network (lab.sh's POD_RANGE).
var podRange = netip.MustParsePrefix("10.244.0.0/16")

// annotatedSubnet is the subnet in a Node's k8s.ovn.org/node-subnets
// annotation ({"default":["CIDR"]}).
func annotatedSubnet(n corev1.Node) (netip.Prefix, error) {
	var v map[string][]string
	a := n.Annotations[modeRow(labMode()).subnetAnnotation]
	if err := json.Unmarshal([]byte(a), &v); err != nil {
		return netip.Prefix{}, err
	}
	if len(v["default"]) != 1 {
		return netip.Prefix{}, fmt.Errorf("want one default subnet, have %q", a)
	}
	return netip.ParsePrefix(v["default"][0])
}

// nodeSubnet is node i's (labNodes) pod subnet: the lab's numbering, or in a
// mode that allocatesSubnets, the one its controller chose.
func nodeSubnet(t testing.TB, i int) netip.Prefix {
	t.Helper()
	if !modeRow(labMode()).allocatesSubnets {
		return netip.MustParsePrefix(labNodes[i].podCIDR)
	}
	var n corev1.Node
	if err := json.Unmarshal([]byte(mustKubectl(t, "get", "node", labNodes[i].name, "-o", "json")), &n); err != nil {
		t.Fatal(err)
	}
	s, err := annotatedSubnet(n)
	if err != nil {
		t.Fatalf("node %s: %v", labNodes[i].name, err)
	}
	return s
}
