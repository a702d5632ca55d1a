//go:build integration

package ovnk

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
)

const (
	nbSchema = "/usr/share/ovn/ovn-nb.ovsschema"
	sbSchema = "/usr/share/ovn/ovn-sb.ovsschema"
)

// central is OVN's central part as the lab runs it: NB and SB ovsdb-servers
// on unix sockets and ovn-northd, children of the test.
type central struct {
	dir, nb, sb string
}

func startCentral(t *testing.T) *central {
	t.Helper()
	testenv.RequireCommands(t, "ovsdb-tool", "ovsdb-server", "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovn-trace")
	for _, s := range []string{nbSchema, sbSchema} {
		if _, err := os.Stat(s); err != nil {
			testenv.Missing(t, "OVN schema "+s+" missing (apt-get install ovn-central ovn-host, or make deps)")
		}
	}
	// Short: a unix socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "ovnk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &central{dir: dir, nb: filepath.Join(dir, "nb.sock"), sb: filepath.Join(dir, "sb.sock")}
	for _, db := range []struct{ name, schema, sock string }{{"nb", nbSchema, c.nb}, {"sb", sbSchema, c.sb}} {
		file := filepath.Join(dir, db.name+".db")
		if out, err := exec.Command("ovsdb-tool", "create", file, db.schema).CombinedOutput(); err != nil {
			t.Fatalf("ovsdb-tool create: %v: %s", err, out)
		}
		c.daemon(t, "ovsdb-server", file, "--remote=punix:"+db.sock,
			"--unixctl="+filepath.Join(dir, db.name+".ctl"), "--log-file="+filepath.Join(dir, db.name+".log"))
		testenv.WaitListening(t, db.sock, time.Minute)
	}
	c.nbctl(t, "init")
	c.daemon(t, "ovn-northd", "--ovnnb-db=unix:"+c.nb, "--ovnsb-db=unix:"+c.sb,
		"--unixctl="+filepath.Join(dir, "northd.ctl"), "--log-file="+filepath.Join(dir, "northd.log"))
	return c
}

// daemon starts a child that dies with the test.
func (c *central) daemon(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+c.dir, "OVN_RUNDIR="+c.dir, "OVS_LOGDIR="+c.dir, "OVN_LOGDIR="+c.dir)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

func (c *central) nbctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ovn-nbctl", append([]string{"--db=unix:" + c.nb}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ovn-nbctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (c *central) sbctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ovn-sbctl", append([]string{"--db=unix:" + c.sb}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ovn-sbctl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// trace runs ovn-trace on the SB database once northd has caught up, for
// the first packet of a connection (every conntrack pass says new); it fails
// the test on any warning, such as a match northd copied but OVN cannot parse.
func (c *central) trace(t *testing.T, datapath, flow string) string {
	t.Helper()
	c.nbctl(t, "--wait=sb", "--timeout=20", "sync")
	cmd := exec.Command("ovn-trace", "--db=unix:"+c.sb, "--ct=new", "--ct=new", "--ct=new", "--ct=new", datapath, flow)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("ovn-trace %s %q: %v\nstderr: %s\nstdout: %s", datapath, flow, err, stderr.String(), out)
	}
	return string(out)
}

// connect returns a libovsdb client monitoring NBModel's tables.
func (c *central) connect(t *testing.T) client.Client {
	t.Helper()
	m, err := NBModel()
	if err != nil {
		t.Fatal(err)
	}
	discard := logr.Discard()
	nb, err := client.NewOVSDBClient(m, client.WithEndpoint("unix:"+c.nb), client.WithLogger(&discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nb.Connect(ctx); err != nil {
		t.Fatalf("connect to NB: %v", err)
	}
	if _, err := nb.MonitorAll(ctx); err != nil {
		t.Fatalf("monitor NB: %v", err)
	}
	t.Cleanup(nb.Close)
	return nb
}

// waitFor polls cond until it holds; timeout only ends a wait that would
// hang (how soon OVN gets there depends on the machine, not on the code).
func waitFor(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
