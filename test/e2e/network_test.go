//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// webFixture: a server pod on each node behind a ClusterIP Service, and a
// client pod on node 1 that is not an endpoint.
type webFixture struct {
	ns        string
	pods      map[string]*corev1.Pod
	clusterIP string
}

var web *webFixture

func getWeb(t testing.TB) *webFixture {
	t.Helper()
	requireLab(t)
	if web != nil {
		return web
	}
	ns := fmt.Sprintf("e2e-web-%d", time.Now().UnixNano()%100000)
	createNamespace(t, ns)
	m := podSpec(ns, "srv-1", labNodes[0].name, map[string]string{"app": "web"}) +
		podSpec(ns, "srv-2", labNodes[1].name, map[string]string{"app": "web"}) +
		podSpec(ns, "client", labNodes[0].name, map[string]string{"role": "client"}) +
		serviceSpec(ns, "web", "web", http80, svcPort{name: "alt", port: 8080, target: 8080})
	apply(t, m)
	w := &webFixture{ns: ns, pods: waitPods(t, ns, "srv-1", "srv-2", "client")}
	w.clusterIP = strings.TrimSpace(mustKubectl(t, "get", "service", "-n", ns, "web", "-o", "jsonpath={.spec.clusterIP}"))
	web = w
	return w
}

// Done-when 2: pods on both nodes get IPs from their node's pod CIDR.
func TestPodsGetIPsOnBothNodes(t *testing.T) {
	w := getWeb(t)
	for i, name := range []string{"srv-1", "srv-2"} {
		p := w.pods[name]
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil {
			t.Errorf("pod %s has no IP: %q", name, p.Status.PodIP)
			continue
		}
		cidr := nodeSubnet(t, i)
		if p.Spec.NodeName != labNodes[i].name || !cidr.Contains(ip) || p.Status.HostIP != labNodes[i].ip {
			t.Errorf("pod %s: node %s IP %s hostIP %s; want node %s, IP in %s, hostIP %s",
				name, p.Spec.NodeName, ip, p.Status.HostIP, labNodes[i].name, cidr, labNodes[i].ip)
		}
	}
}

// Done-when 2: TCP (and UDP) from a pod on node 1 to a pod on node 2, through
// the Geneve tunnel.
func TestCrossNodeTCP(t *testing.T) {
	w := getWeb(t)
	dst := w.pods["srv-2"].Status.PodIP
	for _, port := range []string{"80", "8080"} {
		out, err := execIn(w.ns, "client", "get", "http://"+dst+":"+port+"/")
		if err != nil || !strings.Contains(out, "srv-2 port "+port) {
			t.Errorf("client (node 1) -> srv-2 (node 2) TCP %s: %q, %v", port, out, err)
		}
	}
	out, err := execIn(w.ns, "client", "udp", dst+":5000", "ping-over-geneve")
	if err != nil || !strings.HasPrefix(out, "ping-over-geneve\nresult=served ") {
		t.Errorf("client -> srv-2 UDP echo: %q, %v", out, err)
	}
	// And back, node 2 to node 1.
	out, err = execIn(w.ns, "srv-2", "get", "http://"+w.pods["srv-1"].Status.PodIP+"/")
	if err != nil || !strings.Contains(out, "srv-1 port 80") {
		t.Errorf("srv-2 (node 2) -> srv-1 (node 1): %q, %v", out, err)
	}
}

// Done-when 2: a ClusterIP Service reaches its endpoints on both nodes
// (select group + ct nat in the lab agent's pipeline).
func TestClusterIPServiceReachesBothNodes(t *testing.T) {
	w := getWeb(t)
	seen := map[string]int{}
	eventually(t, 60*time.Second, "reaching both endpoints through "+w.clusterIP, func() error {
		out, err := execIn(w.ns, "client", "get", "http://"+w.clusterIP+"/")
		if err != nil {
			return err
		}
		seen[strings.Fields(out)[0]]++
		if seen["srv-1"] == 0 || seen["srv-2"] == 0 {
			return fmt.Errorf("answers so far: %v", seen)
		}
		return nil
	})
	out, err := execIn(w.ns, "client", "get", "http://"+w.clusterIP+":8080/")
	if err != nil || !strings.Contains(out, "port 8080") {
		t.Errorf("service port 8080: %q, %v", out, err)
	}
	t.Logf("answers: %v", seen)
	// Hairpin: an endpoint reaching its own Service, and so sometimes
	// itself, its source SNATed to the dataplane's hairpin address: the
	// real Antrea v2.3.2 uses its node's gateway (antrea-gw0, 10.244.1.1, seen
	// in Antrea mode), the lab agent 169.254.0.253 in lab mode, OVN-Kubernetes' hairpin_snat_ip
	// 169.254.169.5 in OVN mode.
	self := map[string]int{}
	eventually(t, 60*time.Second, "srv-1 reaching itself and srv-2 through "+w.clusterIP, func() error {
		out, err := execIn(w.ns, "srv-1", "get", "-timeout", "2s", "http://"+w.clusterIP+"/")
		if err != nil {
			return err
		}
		self[strings.Fields(out)[0]]++
		if self["srv-1"] == 0 || self["srv-2"] == 0 {
			return fmt.Errorf("answers so far: %v", self)
		}
		return nil
	})
	hairpinSrc := modeRow(labMode()).hairpinSrc
	if logs := mustKubectl(t, "logs", "-n", w.ns, "srv-1"); !strings.Contains(logs, "from "+hairpinSrc+":") {
		t.Errorf("srv-1 did not see its hairpin connection come from %s:\n%s", hairpinSrc, logs)
	}
}

// Done-when 2: a NetworkPolicy that denies ingress makes that connection
// fail while other connections still work.
func TestNetworkPolicyIngressDeny(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "netpol")
	apply(t, podSpec(ns, "server", labNodes[1].name, map[string]string{"app": "server"})+
		podSpec(ns, "other", labNodes[1].name, map[string]string{"app": "other"})+
		podSpec(ns, "client", labNodes[0].name, map[string]string{"role": "client"})+
		podSpec(ns, "friend", labNodes[0].name, map[string]string{"role": "friend"}))
	pods := waitPods(t, ns, "server", "other", "client", "friend")
	server, other := pods["server"].Status.PodIP, pods["other"].Status.PodIP
	for _, url := range []string{"http://" + server + "/", "http://" + server + ":8080/", "http://" + other + "/"} {
		eventually(t, 20*time.Second, "before the policy: "+url, func() error {
			_, err := execIn(ns, "client", "get", url)
			return err
		})
	}
	// server accepts only port 8080, and port 80 only from role=friend.
	apply(t, netpol{ns: ns, name: "server-ingress", app: "server", types: []string{"Ingress"}, ingress: []string{
		tcpRule("", 8080),
		tcpRule("from: [{podSelector: {matchLabels: {role: friend}}}]", 80),
	}}.yaml())
	eventually(t, 20*time.Second, "the policy to deny client -> server:80", func() error {
		if out, err := execIn(ns, "client", "get", "-timeout", "1s", "http://"+server+"/"); err == nil {
			return fmt.Errorf("still allowed: %q", out)
		}
		return nil
	})
	for _, c := range []struct{ from, url, want string }{
		{"client", "http://" + server + ":8080/", "server port 8080"},
		{"friend", "http://" + server + "/", "server port 80"},
		{"client", "http://" + other + "/", "other port 80"},
	} {
		out, err := execIn(ns, c.from, "get", c.url)
		if err != nil || !strings.Contains(out, c.want) {
			t.Errorf("with the policy, %s -> %s should work: %q, %v", c.from, c.url, out, err)
		}
	}
	if out, err := execIn(ns, "client", "get", "-timeout", "2s", "http://"+server+"/"); err == nil {
		t.Errorf("with the policy, client -> server:80 should fail, got %q", out)
	}
	// Deleting the policy restores the connection.
	mustKubectl(t, "delete", "networkpolicy", "-n", ns, "server-ingress")
	eventually(t, 20*time.Second, "client -> server:80 after deleting the policy", func() error {
		_, err := execIn(ns, "client", "get", "-timeout", "1s", "http://"+server+"/")
		return err
	})
}

// Done-when 2: `kubectl logs -f` streams a pod's output as it is written.
func TestKubectlLogsFollow(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "logs")
	apply(t, podSpec(ns, "ticker", labNodes[1].name, nil, "serve", "-log-every", "200ms"))
	waitPods(t, ns, "ticker")
	// What the pod had written before the follow starts: its last tick.
	// Ticks numbered beyond it were written later, so a follow that shows
	// them streamed them as the pod wrote them (no clock involved).
	before := -1
	for _, l := range strings.Split(mustKubectl(t, "logs", "-n", ns, "ticker"), "\n") {
		if n, err := strconv.Atoi(strings.TrimPrefix(l, "tick ")); err == nil && strings.HasPrefix(l, "tick ") {
			before = n
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // ends a hung follow only
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "logs", "-f", "-n", ns, "ticker")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(stateDir(), "kubeconfig"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	late := 0
	for late < 3 && sc.Scan() {
		if n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "tick ")); err == nil && n > before {
			late++
		}
	}
	if late < 3 {
		t.Fatalf("kubectl logs -f stopped streaming (%d lines written after tick %d): %v", late, before, sc.Err())
	}
}

// Done-when 2: a privileged hostNetwork pod with a hostPath of
// /var/run/openvswitch sees its own node's OVS: br-int, and as pod ports
// exactly that node's pods.
func TestHostNetworkPodSeesOwnOVS(t *testing.T) {
	w := getWeb(t)
	ns := namespace(t, "ovs")
	var m strings.Builder
	for i, n := range labNodes {
		fmt.Fprintf(&m, `apiVersion: v1
kind: Pod
metadata: {name: ovs-%d, namespace: %s}
spec:
  nodeName: %s
  hostNetwork: true
  restartPolicy: Never
  containers:
  - name: ovs
    image: %s
    imagePullPolicy: Never
    args: [ovs-ports, /var/run/openvswitch/db.sock]
    securityContext: {privileged: true}
    volumeMounts: [{name: ovs, mountPath: /var/run/openvswitch}]
  volumes: [{name: ovs, hostPath: {path: /var/run/openvswitch}}]
---
`, i+1, ns, n.name, workloadImage)
	}
	apply(t, m.String())
	waitPods(t, ns, "ovs-1", "ovs-2")
	for i, n := range labNodes {
		var got struct {
			Bridges []string `json:"bridges"`
			Ports   []struct {
				Name, PodName, PodNamespace string
			} `json:"ports"`
		}
		out := mustKubectl(t, "logs", "-n", ns, fmt.Sprintf("ovs-%d", i+1))
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("ovs-%d output %q: %v", i+1, out, err)
		}
		if !strings.Contains(strings.Join(got.Bridges, ","), "br-int") {
			t.Errorf("%s: bridges %v lack br-int", n.name, got.Bridges)
		}
		pods := map[string]bool{}
		for _, p := range got.Ports {
			if p.PodName != "" {
				pods[p.PodNamespace+"/"+p.PodName] = true
			}
		}
		mine, theirs := w.ns+"/srv-1", w.ns+"/srv-2"
		if i == 1 {
			mine, theirs = theirs, mine
		}
		if !pods[mine] || pods[theirs] {
			t.Errorf("%s: its OVS should list pod %s and not %s; pod ports: %v", n.name, mine, theirs, pods)
		}
		// Every pod port belongs to a pod scheduled on this node.
		for p := range pods {
			nsName := strings.SplitN(p, "/", 2)
			out, err := kubectl(context.Background(), "get", "pod", "-n", nsName[0], nsName[1], "-o", "jsonpath={.spec.nodeName}")
			if err == nil && out != n.name {
				t.Errorf("%s's OVS has a port for pod %s, which runs on %s", n.name, p, out)
			}
		}
	}
}

// The NetworkPolicy subset also covers egress and namespace selectors: the
// client may only reach TCP 8080 of pods in namespaces labelled
// e2e-egress=allowed.
func TestNetworkPolicyEgressNamespaceSelector(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "egress")
	mustKubectl(t, "label", "namespace", ns, "e2e-egress=allowed")
	apply(t, podSpec(ns, "server", labNodes[1].name, map[string]string{"app": "server"})+
		podSpec(ns, "client", labNodes[0].name, map[string]string{"role": "client"}))
	pods := waitPods(t, ns, "server", "client")
	server := pods["server"].Status.PodIP
	for _, port := range []string{"80", "8080"} {
		eventually(t, 20*time.Second, "before the policy: port "+port, func() error {
			_, err := execIn(ns, "client", "get", "http://"+server+":"+port+"/")
			return err
		})
	}
	apply(t, fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: client-egress, namespace: %s}
spec:
  podSelector: {matchLabels: {role: client}}
  policyTypes: [Egress]
  egress:
  - to: [{namespaceSelector: {matchLabels: {e2e-egress: allowed}}}]
    ports: [{protocol: TCP, port: 8080}]
`, ns))
	eventually(t, 20*time.Second, "the egress policy to deny client -> server:80", func() error {
		if out, err := execIn(ns, "client", "get", "-timeout", "1s", "http://"+server+"/"); err == nil {
			return fmt.Errorf("still allowed: %q", out)
		}
		return nil
	})
	if out, err := execIn(ns, "client", "get", "http://"+server+":8080/"); err != nil || !strings.Contains(out, "server port 8080") {
		t.Errorf("egress to TCP 8080 in an allowed namespace should work: %q, %v", out, err)
	}
	// The server itself is not selected: its own egress is unrestricted.
	if out, err := execIn(ns, "server", "get", "http://"+pods["client"].Status.PodIP+"/"); err != nil {
		t.Errorf("server -> client should work: %q, %v", out, err)
	}
	// Unlabel the namespace: port 8080 is no longer allowed either.
	mustKubectl(t, "label", "namespace", ns, "e2e-egress-")
	eventually(t, 20*time.Second, "client -> server:8080 denied once the namespace is unlabelled", func() error {
		if out, err := execIn(ns, "client", "get", "-timeout", "1s", "http://"+server+":8080/"); err == nil {
			return fmt.Errorf("still allowed: %q", out)
		}
		return nil
	})
}

// The kubelet reaches its pods (through antrea-gw0, as on an Antrea node):
// HTTP readiness probes pass on both nodes, even under a NetworkPolicy that
// denies all ingress, since policy exempts the node's own traffic.
func TestKubeletProbesReachPods(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "probes")
	var m strings.Builder
	m.WriteString(denyIngress(ns, "deny-all-ingress", ""))
	for i, n := range labNodes {
		fmt.Fprintf(&m, `apiVersion: v1
kind: Pod
metadata: {name: probed-%d, namespace: %s}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: workload
    image: %s
    imagePullPolicy: Never
    readinessProbe: {httpGet: {port: 8080, path: /ready}, periodSeconds: 1}
    livenessProbe: {tcpSocket: {port: 80}, periodSeconds: 2}
---
`, i+1, ns, n.name, workloadImage)
	}
	apply(t, m.String())
	waitPods(t, ns, "probed-1", "probed-2")
	out := mustKubectl(t, "logs", "-n", ns, "probed-1")
	// The node reaches its pods through its gateway in lab mode (Antrea's
	// antrea-gw0 holds .1), through the management port ovn-k8s-mp0 (.2)
	// in OVN mode, as OVN-Kubernetes does.
	from := modeRow(labMode()).nodeSrc
	if !strings.Contains(out, "http 8080 /ready from "+from) {
		t.Errorf("probes did not come from the node's address on the pod network %s:\n%s", from, out)
	}
}
