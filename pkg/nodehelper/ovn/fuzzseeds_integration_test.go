//go:build integration

package ovn

import (
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

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
)

var recordSeeds = flag.Bool("record-seeds", false, "rewrite testdata/fuzz from real OVN databases")

// The seeds of FuzzReadRows are what real OVN databases answered Read's
// own monitors (taken between the two), for a switch with a pod port, an
// ACL and a load balancer recorded as OVN-Kubernetes records them. With
// -record-seeds this rewrites them and the schemas; without, it checks that
// the committed seed still decodes to the rows Read gets from these
// databases (the same count of each, the same stages, ACLs and load
// balancers).
func TestIntegrationReadFuzzSeeds(t *testing.T) {
	nb, sb, nbctl := startOVN(t)
	nbctl("--id=@a", "create", "ACL", "direction=to-lport", "priority=1001", `match="outport == \"demo_web\" && tcp.dst == 81"`, "action=drop",
		`external_ids:"k8s.ovn.org/owner-type"=NetworkPolicy`, `external_ids:"k8s.ovn.org/name"="demo:deny-81"`, "--", "add", "Logical_Switch", "node-1", "acls", "@a")
	nbctl("lb-add", "Service_demo/web_TCP_cluster", "10.96.0.10:80", "10.244.1.5:8080", "tcp")
	nbctl("set", "Load_Balancer", "Service_demo/web_TCP_cluster", `external_ids:"k8s.ovn.org/kind"=Service`, `external_ids:"k8s.ovn.org/owner"="demo/web"`)
	nbctl("ls-lb-add", "node-1", "Service_demo/web_TCP_cluster")
	nbctl("--wait=sb", "--timeout=20", "sync")

	sbTap, nbTap := ovstest.NewTap(t, sb), ovstest.NewTap(t, nb)
	real, err := Read(context.Background(), "unix:"+sbTap.Path, "unix:"+nbTap.Path, 10*time.Second)
	if err != nil || real.NBUnread != "" {
		t.Fatalf("Read: %v (northbound: %s)", err, real.NBUnread)
	}
	sbTap.Close()
	nbTap.Close()
	sbReply := sbTap.ResultOf(t, "monitor_cond_since", "OVN_Southbound")
	nbReply := nbTap.ResultOf(t, "monitor_cond_since", "OVN_Northbound")
	seed := filepath.Join("testdata", "fuzz", "FuzzReadRows", "switch-acl-lb")
	if *recordSeeds {
		for _, s := range []struct {
			tp     *ovstest.Tap
			db     string
			file   string
			tables map[string]bool
		}{
			{sbTap, "OVN_Southbound", sbSchemaFile, map[string]bool{"Logical_Flow": true, "Datapath_Binding": true, "Logical_DP_Group": true, "Port_Binding": true}},
			{nbTap, "OVN_Northbound", nbSchemaFile, map[string]bool{"ACL": true, "Load_Balancer": true}},
		} {
			var schema libovsdb.DatabaseSchema
			if err := json.Unmarshal(s.tp.ResultOf(t, "get_schema", s.db), &schema); err != nil {
				t.Fatal(err)
			}
			for name := range schema.Tables {
				if !s.tables[name] {
					delete(schema.Tables, name)
				}
			}
			b, err := json.MarshalIndent(schema, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			write(t, s.file, append(b, '\n'))
		}
		write(t, seed, []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n[]byte(%s)\nstring(%q)\n",
			strconv.Quote(string(sbReply)), strconv.Quote(string(nbReply)), "tcp,reg15=0x1,metadata=0x1,tp_dst=81")))
	}
	v := ovstest.ReadSeed(t, seed)
	got, err := readRows(ovstest.LoadSchema(t, sbSchemaFile), ovstest.LoadSchema(t, nbSchemaFile), v[0], v[1])
	if err != nil {
		t.Fatal(err)
	}
	if a, b := shape(got), shape(real); a != b {
		t.Errorf("the recorded seed %s decodes to\n%s\nwhat Read got from these databases to\n%s\n(go test -tags integration -record-seeds to record again)", seed, a, b)
	}
}

// shape is what of the databases stays the same from one run to the next
// (UUIDs do not).
func shape(db DB) string {
	stages := map[string]int{}
	for _, lf := range db.LogicalFlows {
		stages[lf.ExternalIDs["stage-name"]]++
	}
	var acls, lbs []string
	for _, a := range db.ACLs {
		acls = append(acls, a.Direction+" "+a.Match+" "+a.Action)
	}
	for _, l := range db.LoadBalancers {
		lbs = append(lbs, l.Name)
	}
	return fmt.Sprintf("%d logical flows %v\n%d datapaths, %d groups, %d port bindings\nACLs %v\nload balancers %v",
		len(db.LogicalFlows), stages, len(db.Datapaths), len(db.DPGroups), len(db.PortBindings), acls, lbs)
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
