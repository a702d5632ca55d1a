//go:build integration

package ovsdb

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	libovsdb "github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/testenv"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
)

var recordSeeds = flag.Bool("record-seeds", false, "rewrite testdata/fuzz from a real ovsdb-server")

// The seeds of FuzzSnapshotRows are what a real ovsdb-server answered
// Snapshot's own monitor (taken between the two), on a node shaped as
// Antrea shapes one (pods with pod-name, pod-namespace, ip and mac on the
// Port; a gateway; a Geneve tunnel) and as OVN-Kubernetes does (iface-id,
// attached_mac and ip_addresses on the Interface; the management port).
// With -record-seeds this rewrites them and the schema; without, it checks
// that the committed seed still decodes to this ovsdb-server's layout.
func TestIntegrationSnapshotFuzzSeeds(t *testing.T) {
	testenv.RequireOVS(t)
	n := ovstest.NewNode(t, 1)
	n.AddPod("demo", "web", 5)
	n.Vsctl("add-port", n.Bridge, "tun0", "--", "set", "interface", "tun0", "type=geneve", "options:remote_ip=flow", "options:key=flow", "ofport_request=100")
	n.Vsctl("add-port", n.Bridge, "ovnk-db", "--", "set", "interface", "ovnk-db", "type=internal", "ofport_request=7",
		"external_ids:iface-id=demo_db", `external_ids:attached_mac="0a:58:0a:f4:01:07"`, `external_ids:ip_addresses="10.244.1.7/24,fd00:10:244:1::7/64"`)
	n.Vsctl("add-port", n.Bridge, "ovn-k8s-mp0", "--", "set", "interface", "ovn-k8s-mp0", "type=internal", "ofport_request=8", "external_ids:iface-id=k8s-tf-node-1")
	n.Vsctl("set", "open_vswitch", ".", "external_ids:ovn-remote=unix:/var/run/ovn/ovnsb_db.sock", "external_ids:system-id=tf-node-1")
	tp := ovstest.NewTap(t, filepath.Join(n.Dir, "db.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	real, err := Snapshot(ctx, "unix:"+tp.Path)
	if err != nil {
		t.Fatal(err)
	}
	tp.Close()
	reply := tp.ResultOf(t, "monitor_cond_since", "Open_vSwitch")
	seed := filepath.Join("testdata", "fuzz", "FuzzSnapshotRows", "antrea-and-ovnk-ports")
	if *recordSeeds {
		var s libovsdb.DatabaseSchema
		if err := json.Unmarshal(tp.ResultOf(t, "get_schema", "Open_vSwitch"), &s); err != nil {
			t.Fatal(err)
		}
		for name := range s.Tables {
			if name != "Open_vSwitch" && name != "Bridge" && name != "Port" && name != "Interface" {
				delete(s.Tables, name)
			}
		}
		b, err := json.MarshalIndent(s, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		write(t, schemaFile, append(b, '\n'))
		write(t, seed, []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(reply)))))
	}
	// What the seed decodes to is what Snapshot read: the same bridges,
	// ports (by name, type and pod) and root external_ids.
	bridges, ports, ifaces, roots, err := snapshotRows(loadSchema(t), ovstest.ReadSeed(t, seed)[0])
	if err != nil {
		t.Fatal(err)
	}
	got := Build(bridges, ports, ifaces)
	if len(roots) == 1 {
		got.ExternalIDs = roots[0].ExternalIDs
	}
	if a, b := layout(got), layout(real); a != b {
		t.Errorf("the recorded seed %s decodes to\n%s\nthis ovsdb-server's rows to\n%s\n(go test -tags integration -record-seeds to record again)", seed, a, b)
	}
}

// layout is what of a node stays the same from one run to the next (pod
// port names and MACs are random).
func layout(n *Node) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ovn-remote=%s\n", n.ExternalIDs["ovn-remote"])
	for _, br := range n.Bridges {
		fmt.Fprintf(&b, "bridge %s %s\n", br.Name, br.DatapathType)
		for _, p := range br.Ports {
			fmt.Fprintf(&b, "  ofport=%d type=%q pod=%q ips=%v tunnel=%v\n", p.Ofport, p.Type, p.PodName(), p.PodIPs(), p.IsTunnel())
		}
	}
	return b.String()
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
