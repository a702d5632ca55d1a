//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// The lab agent's tables, by number, as Antrea names them.
var labTables = []string{
	"PipelineRootClassifier", "ARPSpoofGuard", "ARPResponder", "Classifier", "SpoofGuard",
	"UnSNAT", "ConntrackZone", "ConntrackState", "ServiceLB", "EndpointDNAT", "EgressRule", "EgressDefaultRule",
	"L3Forwarding", "L3DecTTL", "SNAT", "L2ForwardingCalc", "IngressRule", "IngressDefaultRule",
	"ConntrackCommit", "Output",
}

// Done-when 3: on each node, OpenFlow TABLE_FEATURES reports the lab's table
// names (OVSDB Flow_Table rows, not flow comments), as
// `ovs-ofctl dump-table-features` and `ovs-ofctl dump-flows --names` show.
func TestTableNamesInTableFeatures(t *testing.T) {
	requireLab(t)
	for _, n := range labNodes {
		features := nodeExec(t, n.name, "ovs-ofctl", "-O", "OpenFlow15", "dump-table-features", "br-int")
		for i, name := range labTables {
			if !strings.Contains(features, fmt.Sprintf("table %d (\"%s\")", i, name)) {
				t.Errorf("%s: dump-table-features lacks table %d (%q)", n.name, i, name)
			}
		}
		flows := nodeExec(t, n.name, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "--names", "br-int")
		for _, name := range labTables {
			if !strings.Contains(flows, "table="+name+",") {
				t.Errorf("%s: dump-flows --names shows no flow in table=%s", n.name, name)
			}
		}
		if strings.Contains(flows, "table=0,") || strings.Contains(flows, "table=4,") {
			t.Errorf("%s: dump-flows --names still shows table numbers:\n%s", n.name, flows)
		}
	}
}
