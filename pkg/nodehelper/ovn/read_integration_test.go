//go:build integration

package ovn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
)

const (
	nbSchema = "/usr/share/ovn/ovn-nb.ovsschema"
	sbSchema = "/usr/share/ovn/ovn-sb.ovsschema"
)

// startOVN runs real OVN databases and ovn-northd in a directory of the
// test's, initialised with a switch node-1 holding a pod port demo_web,
// and returns their sockets and an ovn-nbctl on the northbound.
func startOVN(t *testing.T) (nb, sb string, nbctl func(args ...string) string) {
	t.Helper()
	testenv.RequireCommands(t, "ovsdb-tool", "ovsdb-server", "ovn-northd", "ovn-nbctl", "ovn-sbctl")
	for _, s := range []string{nbSchema, sbSchema} {
		if _, err := os.Stat(s); err != nil {
			testenv.Missing(t, "OVN schema "+s+" missing (apt-get install ovn-central ovn-host, or make deps)")
		}
	}
	dir, err := os.MkdirTemp("", "ovn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	daemon := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "OVS_RUNDIR="+dir, "OVN_RUNDIR="+dir, "OVS_LOGDIR="+dir, "OVN_LOGDIR="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	nb, sb = filepath.Join(dir, "ovnnb_db.sock"), filepath.Join(dir, "ovnsb_db.sock")
	for _, db := range []struct{ name, schema, sock string }{{"nb", nbSchema, nb}, {"sb", sbSchema, sb}} {
		file := filepath.Join(dir, db.name+".db")
		run("ovsdb-tool", "create", file, db.schema)
		daemon("ovsdb-server", file, "--remote=punix:"+db.sock, "--unixctl="+filepath.Join(dir, db.name+".ctl"))
		testenv.WaitListening(t, db.sock, time.Minute)
	}
	nbctl = func(args ...string) string { return run("ovn-nbctl", append([]string{"--db=unix:" + nb}, args...)...) }
	nbctl("init")
	daemon("ovn-northd", "--ovnnb-db=unix:"+nb, "--ovnsb-db=unix:"+sb, "--unixctl="+filepath.Join(dir, "northd.ctl"))
	nbctl("ls-add", "node-1")
	nbctl("lsp-add", "node-1", "demo_web", "--", "lsp-set-addresses", "demo_web", "0a:58:0a:f4:01:05 10.244.1.5")
	return nb, sb, nbctl
}

// Real OVN databases and northd: the rows Read brings back name a logical
// flow by its stage and datapath, and its ACL by the NetworkPolicy recorded
// in the ACL's external_ids.
func TestIntegrationReadRealDatabases(t *testing.T) {
	nb, sb, nbctl := startOVN(t)
	acl := nbctl("--id=@a", "create", "ACL", "direction=to-lport", "priority=1001", `match="outport == \"demo_web\" && tcp.dst == 81"`, "action=drop",
		`external_ids:"k8s.ovn.org/owner-type"=NetworkPolicy`, `external_ids:"k8s.ovn.org/name"="demo:deny-81"`, "--", "add", "Logical_Switch", "node-1", "acls", "@a")
	nbctl("--wait=sb", "--timeout=20", "sync")

	sbEP, nbEP, err := Endpoints("unix:" + sb)
	if err != nil || nbEP != "unix:"+nb {
		t.Fatalf("Endpoints: %q %q %v", sbEP, nbEP, err)
	}
	db, err := Read(context.Background(), sbEP, nbEP, 5*time.Second)
	if err != nil || db.NBUnread != "" {
		t.Fatalf("Read: %v (northbound: %s)", err, db.NBUnread)
	}
	if len(db.LogicalFlows) < 50 || len(db.PortBindings) != 1 || len(db.Datapaths) != 1 || len(db.ACLs) != 1 {
		t.Fatalf("read %d logical flows, %d port bindings, %d datapaths, %d ACLs", len(db.LogicalFlows), len(db.PortBindings), len(db.Datapaths), len(db.ACLs))
	}
	// The logical flow northd made for the ACL, found by its cookie (the
	// first 32 bits of its UUID) as ovn-controller would install it.
	var lf LogicalFlow
	for _, f := range db.LogicalFlows {
		if f.ExternalIDs["stage-hint"] == acl[:8] && f.ExternalIDs["stage-name"] == "ls_out_acl" {
			lf = f
		}
	}
	if lf.UUID == "" {
		t.Fatalf("no ls_out_acl logical flow with stage-hint %s", acl[:8])
	}
	p, _ := prefix(lf.UUID)
	nm, ok := Index(db).Lookup(uint64(p), "tcp,reg15=0x1,metadata=0x1,tp_dst=81")
	if !ok || nm.Stage != "ls_out_acl" || nm.Datapath != "node-1" || nm.NetworkPolicy != "demo/deny-81" || !strings.Contains(nm.NBRow, "to-lport") {
		t.Errorf("named %+v (%v), want ls_out_acl on node-1 naming demo/deny-81", nm, ok)
	}
	// Nothing listens: the reason names the database.
	if _, err := Read(context.Background(), "unix:"+filepath.Join(t.TempDir(), "none.sock"), nbEP, time.Second); err == nil || !strings.Contains(err.Error(), "southbound") {
		t.Errorf("unreachable southbound: %v", err)
	}
}

// A Live's rows are as fresh as a Read's: an ACL added after its monitors
// began, and the logical flow northd made of it, are in the very next DB.
func TestIntegrationLiveSeesChangesAtOnce(t *testing.T) {
	nb, sb, nbctl := startOVN(t)
	l, err := Watch(context.Background(), "unix:"+sb, "unix:"+nb)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	before, err := l.DB(context.Background())
	if err != nil || before.NBUnread != "" || len(before.ACLs) != 0 {
		t.Fatalf("first DB: %d ACLs, %v (northbound: %s)", len(before.ACLs), err, before.NBUnread)
	}
	for i := range 3 {
		acl := nbctl("--id=@a", "create", "ACL", "direction=to-lport", fmt.Sprintf("priority=%d", 1001+i), fmt.Sprintf(`match="outport == \"demo_web\" && tcp.dst == %d"`, 81+i), "action=drop",
			"--", "add", "Logical_Switch", "node-1", "acls", "@a")
		nbctl("--wait=sb", "--timeout=20", "sync")
		db, err := l.DB(context.Background())
		if err != nil || len(db.ACLs) != i+1 {
			t.Fatalf("after ACL %d: %d ACLs, %v", i+1, len(db.ACLs), err)
		}
		found := false
		for _, f := range db.LogicalFlows {
			found = found || (f.ExternalIDs["stage-hint"] == acl[:8] && f.ExternalIDs["stage-name"] == "ls_out_acl")
		}
		if !found {
			t.Fatalf("after ACL %d: no ls_out_acl logical flow with stage-hint %s among %d", i+1, acl[:8], len(db.LogicalFlows))
		}
	}
	if !l.Connected() {
		t.Error("the monitors are not connected")
	}
}
