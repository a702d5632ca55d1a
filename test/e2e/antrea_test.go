//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// antreaOnly: tests of the lab's Antrea mode itself (the real Antrea v2.3.2).
var antreaOnly = []string{modeAntrea}

// antreaAgentInfo is the part of an AntreaAgentInfo (crd.antrea.io/v1beta1)
// these tests read.
type antreaAgentInfo struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Version         string                      `json:"version"`
	NodeRef         struct{ Name string }       `json:"nodeRef"`
	NodeSubnets     []string                    `json:"nodeSubnets"`
	OVSInfo         struct{ BridgeName string } `json:"ovsInfo"`
	AgentConditions []struct {
		Type, Status      string
		LastHeartbeatTime time.Time
	} `json:"agentConditions"`
}

// Issue 12, done-when 1: in Antrea mode the cluster runs the real Antrea:
// both agents report healthy to the API server, the controller's
// APIServices are Available (the aggregation layer reaches it), and pods get
// their IPs from Antrea: antrea-cni, called by the real kubelet and
// containerd, had the agent attach them to its br-int.
func TestAntreaAgentsHealthyAndAPIServicesAvailable(t *testing.T) {
	requireLab(t)
	// The agent fills in its record when it starts, and then once a minute:
	// a condition that was False at the first report (the controller not yet
	// connected) turns True only at the next heartbeat.
	eventually(t, 75*time.Second, "both agents reporting healthy", func() error {
		var infos struct{ Items []antreaAgentInfo }
		out, err := kubectl(context.Background(), "get", "antreaagentinfos", "-o", "json")
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(out), &infos); err != nil {
			return err
		}
		got := map[string]antreaAgentInfo{}
		for _, i := range infos.Items {
			got[i.Metadata.Name] = i
		}
		for _, n := range labNodes {
			info, ok := got[n.name]
			if !ok {
				return fmt.Errorf("no AntreaAgentInfo for %s (have %d)", n.name, len(infos.Items))
			}
			if info.Version != "v2.3.2" || info.NodeRef.Name != n.name || info.OVSInfo.BridgeName != "br-int" ||
				strings.Join(info.NodeSubnets, ",") != n.podCIDR {
				return fmt.Errorf("AntreaAgentInfo %s: version %q node %q bridge %q subnets %v; want v2.3.2, %s, br-int, %s",
					n.name, info.Version, info.NodeRef.Name, info.OVSInfo.BridgeName, info.NodeSubnets, n.name, n.podCIDR)
			}
			conds := map[string]string{}
			for _, c := range info.AgentConditions {
				conds[c.Type] = c.Status
				// Agents heartbeat about once a minute (the lab's clocks are one).
				if c.Type == "AgentHealthy" && time.Since(c.LastHeartbeatTime) > 2*time.Minute {
					return fmt.Errorf("AntreaAgentInfo %s: last heartbeat %s ago", n.name, time.Since(c.LastHeartbeatTime).Round(time.Second))
				}
			}
			for _, c := range []string{"AgentHealthy", "ControllerConnectionUp", "OVSDBConnectionUp", "OpenflowConnectionUp"} {
				if conds[c] != "True" {
					return fmt.Errorf("AntreaAgentInfo %s: condition %s is %q, want True (all: %v)", n.name, c, conds[c], conds)
				}
			}
		}
		return nil
	})
	if out := mustKubectl(t, "get", "antreacontrollerinfo", "antrea-controller", "-o",
		`jsonpath={.controllerConditions[?(@.type=="ControllerHealthy")].status}`); out != "True" {
		t.Errorf("AntreaControllerInfo antrea-controller: ControllerHealthy is %q, want True", out)
	}
	out := mustKubectl(t, "get", "apiservices", "-l", "app=antrea", "-o",
		`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Available")].status}{"\n"}{end}`)
	for _, s := range []string{"v1beta2.controlplane.antrea.io", "v1beta1.system.antrea.io", "v1alpha1.stats.antrea.io"} {
		if !strings.Contains(out, s+"=True\n") {
			t.Errorf("APIService %s is not Available:\n%s", s, out)
		}
	}
	// Served by the controller through the aggregation layer.
	mustKubectl(t, "get", "--raw", "/apis/controlplane.antrea.io/v1beta2")

	// The web fixture's pods: each one's interface is a port of the agent's
	// br-int on its node, named for the pod by Antrea.
	w := getWeb(t)
	for i, name := range []string{"srv-1", "srv-2"} {
		p := w.pods[name]
		ports := nodeExec(t, labNodes[i].name, "ovs-vsctl", "--bare", "--columns=name,external_ids", "find", "Port",
			"external_ids:pod-name="+name, "external_ids:pod-namespace="+w.ns)
		if !strings.Contains(ports, "ip-address="+p.Status.PodIP) {
			t.Errorf("pod %s (%s): no br-int port of Antrea's on %s carries its IP:\n%s",
				name, p.Status.PodIP, labNodes[i].name, ports)
		}
	}
}

// traceflowStatus is the part of a Traceflow's status this test reads.
type traceflowStatus struct {
	Status struct {
		Phase   string `json:"phase"`
		Reason  string `json:"reason"`
		Results []struct {
			Node         string `json:"node"`
			Observations []struct {
				Component, Action string
			} `json:"observations"`
		} `json:"results"`
	} `json:"status"`
}

// Issue 12, done-when 2: Antrea itself works in the lab. A Traceflow created
// with plain kubectl (not through the plugin), from a pod on node 1 to a pod
// on node 2, reaches Succeeded with results from both nodes: the sender's
// ending in Forwarded to the tunnel, the receiver's in Delivered.
func TestAntreaTraceflowByKubectlCreate(t *testing.T) {
	w := getWeb(t)
	name := fmt.Sprintf("e2e-antrea-%d", time.Now().UnixNano()%100000)
	manifest := fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: Traceflow
metadata: {name: %s}
spec:
  source: {namespace: %s, pod: client}
  destination: {namespace: %s, pod: srv-2}
  packet:
    transportHeader:
      tcp: {dstPort: 80, flags: 2}
  timeout: 20
`, name, w.ns, w.ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", "create", "-f", "-")
	cmd.Env = kubectlEnv()
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl create -f: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = kubectl(context.Background(), "delete", "traceflow", name, "--wait=false") })

	var tf traceflowStatus
	start := time.Now()
	for {
		if err := json.Unmarshal([]byte(mustKubectl(t, "get", "traceflow", name, "-o", "json")), &tf); err != nil {
			t.Fatal(err)
		}
		if tf.Status.Phase == "Succeeded" || tf.Status.Phase == "Failed" {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("Traceflow %s still %q after 30s", name, tf.Status.Phase)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("Traceflow %s: %s after %s", name, tf.Status.Phase, time.Since(start).Round(10*time.Millisecond))
	if tf.Status.Phase != "Succeeded" {
		t.Fatalf("Traceflow %s: phase %s (%s), want Succeeded", name, tf.Status.Phase, tf.Status.Reason)
	}
	last := map[string]string{}
	for _, r := range tf.Status.Results {
		if len(r.Observations) == 0 {
			t.Errorf("result of %s has no observations", r.Node)
			continue
		}
		o := r.Observations[len(r.Observations)-1]
		last[r.Node] = o.Component + "/" + o.Action
	}
	want := map[string]string{labNodes[0].name: "Forwarding/Forwarded", labNodes[1].name: "Forwarding/Delivered"}
	for node, end := range want {
		if last[node] != end {
			t.Errorf("Traceflow %s: %s ends with %q, want %q (all results: %+v)", name, node, last[node], end, tf.Status.Results)
		}
	}
	if real := realTraffic(t, probe{w.ns, "client", "tcp", w.pods["srv-2"].Status.PodIP, 80}); real != served {
		t.Errorf("Antrea's Traceflow says Delivered; real traffic between the same pods was %s", real)
	}
}
