// Package ovstest runs real Open vSwitch instances for tests: each "node" is
// a network namespace with its own ovsdb-server and ovs-vswitchd (userspace
// datapath) started as children of the test, with its own run directory.
// Pods are veth pairs into their own namespaces; two nodes are joined by a
// veth underlay with Geneve ports. Everything is removed at test cleanup.
package ovstest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
)

// Node is one OVS instance in its own network namespace.
type Node struct {
	t testing.TB
	// Name is the node's name in reports.
	Name string
	// NS is the network namespace.
	NS string
	// Dir is OVS's run, db, log and sysconf directory.
	Dir string
	// Bridge is the pod bridge (br-int).
	Bridge string
	// Index numbers the node (1, 2, ...): pod subnet 10.10.Index.0/24.
	Index int
	// Gateway is the bridge's gateway port (antrea-type=gateway).
	GatewayMAC string
	underlay
	procs []*exec.Cmd
	pods  []*Pod
	// agentFlows are the flows the test's "CNI agent" programmed
	// (Pipeline, DenyIngress): what Resync puts back.
	agentFlows []string
}

var suffix = func() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewNode starts OVS in a fresh network namespace and creates br-int
// (datapath_type=netdev, OpenFlow 1.0-1.5) with a gateway port gw0.
func NewNode(t testing.TB, index int) *Node {
	t.Helper()
	id := suffix()
	dir, err := os.MkdirTemp("", "tfh"+id)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{t: t, Name: fmt.Sprintf("node%d", index), NS: "tfh" + id, Dir: dir, Bridge: "br-int", Index: index,
		GatewayMAC: fmt.Sprintf("02:00:00:00:%02x:01", index)}
	t.Cleanup(n.stop)
	n.mustRun("ip", "netns", "add", n.NS)
	n.Sh("ip link set lo up")
	n.mustRun("ovsdb-tool", "create", filepath.Join(dir, "conf.db"), "/usr/share/openvswitch/vswitch.ovsschema")
	n.start("ovsdb-server", filepath.Join(dir, "conf.db"), "--remote=punix:"+filepath.Join(dir, "db.sock"),
		"--pidfile="+filepath.Join(dir, "ovsdb-server.pid"), "--log-file="+filepath.Join(dir, "ovsdb-server.log"))
	testenv.WaitListening(t, filepath.Join(dir, "db.sock"), 5*time.Second)
	n.Vsctl("--no-wait", "init")
	n.start("ovs-vswitchd", "unix:"+filepath.Join(dir, "db.sock"), "--pidfile="+filepath.Join(dir, "ovs-vswitchd.pid"),
		"--log-file="+filepath.Join(dir, "ovs-vswitchd.log"))
	n.waitFor(filepath.Join(dir, "ovs-vswitchd.pid"))
	n.Vsctl("add-br", n.Bridge, "--", "set", "bridge", n.Bridge, "datapath_type=netdev",
		"protocols=OpenFlow10,OpenFlow13,OpenFlow15", "fail_mode=secure")
	n.Vsctl("add-port", n.Bridge, "gw0", "--", "set", "interface", "gw0", "type=internal",
		"mac=\""+n.GatewayMAC+"\"", "ofport_request=2", "--", "set", "port", "gw0", "external_ids:antrea-type=gateway")
	n.checkOfport("gw0")
	return n
}

func (n *Node) env() []string {
	return append(os.Environ(), "OVS_RUNDIR="+n.Dir, "OVS_DBDIR="+n.Dir, "OVS_LOGDIR="+n.Dir, "OVS_SYSCONFDIR="+n.Dir)
}

// start runs a daemon inside the namespace as a child of the test; it dies
// with the test process (Pdeathsig) even if cleanup never runs.
func (n *Node) start(name string, args ...string) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.NS, name}, args...)...) //nolint:gosec // test harness: fixed daemons
	cmd.Env = n.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start %s: %v", name, err)
	}
	n.procs = append(n.procs, cmd)
}

func (n *Node) waitFor(path string) {
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.t.Fatalf("%s did not appear within 5s", path)
}

func (n *Node) stop() {
	for _, p := range n.pods {
		_ = exec.Command("ip", "netns", "del", p.NS).Run() //nolint:gosec // names made by the harness
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	_ = exec.Command("ip", "netns", "del", n.NS).Run() //nolint:gosec // names made by the harness
	if n.t.Failed() {
		for _, f := range []string{"ovs-vswitchd.log"} {
			if b, err := os.ReadFile(filepath.Join(n.Dir, f)); err == nil { //nolint:gosec // the harness's own directory
				n.t.Logf("%s %s (tail):\n%s", n.Name, f, tail(string(b), 30))
			}
		}
	}
	_ = os.RemoveAll(n.Dir)
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func (n *Node) mustRun(name string, args ...string) string {
	n.t.Helper()
	cmd := exec.Command(name, args...) //nolint:gosec // test harness: the tests' own commands
	cmd.Env = n.env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		n.t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// Sh runs a shell command inside the node's namespace.
func (n *Node) Sh(script string) string {
	n.t.Helper()
	return n.mustRun("ip", "netns", "exec", n.NS, "sh", "-ec", script)
}

// Vsctl runs ovs-vsctl against this node's database.
func (n *Node) Vsctl(args ...string) string {
	n.t.Helper()
	return n.mustRun("ovs-vsctl", append([]string{"--db=unix:" + filepath.Join(n.Dir, "db.sock"), "--timeout=10"}, args...)...)
}

// Ofctl runs ovs-ofctl -O OpenFlow15 COMMAND BRIDGE-SOCKET ARGS.
func (n *Node) Ofctl(command string, args ...string) string {
	n.t.Helper()
	return n.mustRun("ovs-ofctl", append([]string{"-O", "OpenFlow15", command, n.MgmtSocket()}, args...)...)
}

// Appctl runs an ovs-appctl command against this node's ovs-vswitchd.
func (n *Node) Appctl(args ...string) string {
	n.t.Helper()
	return n.mustRun("ovs-appctl", append([]string{"-t", n.CtlSocket()}, args...)...)
}

// MgmtSocket is the bridge's OpenFlow management socket.
func (n *Node) MgmtSocket() string { return filepath.Join(n.Dir, n.Bridge+".mgmt") }

// CtlSocket is ovs-vswitchd's control socket.
func (n *Node) CtlSocket() string {
	b, err := os.ReadFile(filepath.Join(n.Dir, "ovs-vswitchd.pid"))
	if err != nil {
		n.t.Fatal(err)
	}
	return filepath.Join(n.Dir, "ovs-vswitchd."+strings.TrimSpace(string(b))+".ctl")
}

// Ofport returns a port's OpenFlow number, failing the test if OVS could
// not add it (ovs-vsctl add-port exits 0 even then).
func (n *Node) Ofport(port string) int {
	n.t.Helper()
	return n.checkOfport(port)
}

func (n *Node) checkOfport(port string) int {
	n.t.Helper()
	for i := 0; i < 100; i++ {
		s := strings.TrimSpace(n.Vsctl("get", "interface", port, "ofport"))
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			return v
		} else if err == nil && v == -1 {
			n.t.Fatalf("OVS could not add port %s: %s", port, n.Vsctl("get", "interface", port, "error"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	n.t.Fatalf("port %s got no ofport", port)
	return 0
}

// NameTables names tables through OVSDB Flow_Table rows, as Antrea does,
// so that TABLE_FEATURES carries the names.
func (n *Node) NameTables(names map[int]string) {
	n.t.Helper()
	args := []string{}
	set := []string{"--", "set", "bridge", n.Bridge}
	for id, name := range names {
		args = append(args, "--", fmt.Sprintf("--id=@t%d", id), "create", "Flow_Table", "name="+name)
		set = append(set, fmt.Sprintf("flow_tables:%d=@t%d", id, id))
	}
	n.Vsctl(append(args, set...)...)
}

// AddFlows adds flows (ovs-ofctl syntax, one a line).
func (n *Node) AddFlows(flows string) {
	n.t.Helper()
	f := filepath.Join(n.Dir, "flows.txt")
	if err := os.WriteFile(f, []byte(flows), 0o600); err != nil {
		n.t.Fatal(err)
	}
	n.Ofctl("add-flows", f)
}

// DumpFlows returns the bridge's flows, optionally filtered.
func (n *Node) DumpFlows(filter ...string) string {
	n.t.Helper()
	return n.Ofctl("dump-flows", filter...)
}

// Resync does what a CNI agent that reconciles the whole flow table does
// on every resync (the lab's agent on each cluster event; ovn-controller
// after a reconnect): it replaces the bridge's flows with the ones it
// programmed, in one bundle. Flows it did not program, a trace helper's
// among them, are deleted; its own, unchanged, stay untouched.
func (n *Node) Resync() {
	n.t.Helper()
	f := filepath.Join(n.Dir, "agent-flows.txt")
	if err := os.WriteFile(f, []byte(strings.Join(n.agentFlows, "\n")+"\n"), 0o600); err != nil {
		n.t.Fatal(err)
	}
	n.mustRun("ovs-ofctl", "-O", "OpenFlow15", "--bundle", "replace-flows", n.MgmtSocket(), f)
}
