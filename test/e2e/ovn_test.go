//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The OVN databases as OVN-Kubernetes' interconnect mode puts them on a node.
const (
	ovnNB = "unix:/var/run/ovn/ovnnb_db.sock"
	ovnSB = "unix:/var/run/ovn/ovnsb_db.sock"
)

// ovnOnly: tests of the lab's OVN mode itself.
var ovnOnly = []string{modeOVN}

// Done-when 1 (issue 11): both chassis registered with Geneve encaps, and
// br-int on each node carries OVN's flows only: at least 300 of them, every
// nonzero cookie the first 32 bits of a southbound row's UUID (OVN's own
// marks), none written by the lab. Besides Logical_Flow and Port_Binding,
// ovn-controller marks flows with the UUID of the southbound row they come
// from: its flood flows (tables 39 and 40, reg15 0x8000 and up) with a
// Multicast_Group's, the load-balancer hairpin flows (tables 68-70) with a
// Load_Balancer's (both seen in the lab), learned MACs with a
// MAC_Binding's or FDB's.
func TestOVNChassisAndFlows(t *testing.T) {
	requireLab(t)
	show := nodeExec(t, labNodes[0].name, "ovn-sbctl", "--db", ovnSB, "show")
	for _, n := range labNodes {
		block := chassisBlock(show, n.name)
		if block == "" || !strings.Contains(block, "Encap geneve") || !strings.Contains(block, `ip: "`+n.ip+`"`) {
			t.Errorf("ovn-sbctl show has no chassis %s with a Geneve encap on %s:\n%s", n.name, n.ip, show)
		}
	}
	// OVN's marks: the 32-bit prefixes of the southbound rows' UUIDs.
	marks := map[string]bool{}
	for _, table := range []string{"Logical_Flow", "Port_Binding", "Multicast_Group", "Load_Balancer", "MAC_Binding", "FDB"} {
		out := nodeExec(t, labNodes[0].name, "ovn-sbctl", "--db", ovnSB, "--bare", "--columns=_uuid", "list", table)
		for _, u := range strings.Fields(out) {
			if len(u) >= 8 {
				marks[u[:8]] = true
			}
		}
	}
	cookieRE := regexp.MustCompile(`cookie=0x([0-9a-f]+)`)
	for _, n := range labNodes {
		var flows []string
		// ovn-controller installs its flows a moment after a change: wait
		// until the count settles above the floor.
		eventually(t, 30*time.Second, "OVN's flows on "+n.name, func() error {
			flows = flows[:0]
			for _, l := range strings.Split(nodeExec(t, n.name, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int"), "\n") {
				if strings.Contains(l, "cookie=") {
					flows = append(flows, l)
				}
			}
			if len(flows) < 300 {
				return fmt.Errorf("%d flows", len(flows))
			}
			return nil
		})
		t.Logf("%s: %d flows on br-int", n.name, len(flows))
		foreign := 0
		for _, f := range flows {
			m := cookieRE.FindStringSubmatch(f)
			if m == nil {
				continue // cookie=0 prints as no cookie in some versions
			}
			c, err := strconv.ParseUint(m[1], 16, 64)
			if err != nil || c == 0 {
				continue
			}
			if !marks[fmt.Sprintf("%08x", c)] {
				foreign++
				if foreign <= 5 {
					t.Errorf("%s: flow with cookie %#x, which names no southbound row: %s", n.name, c, f)
				}
			}
		}
		if foreign > 5 {
			t.Errorf("%s: %d flows in all whose cookie names no southbound row", n.name, foreign)
		}
	}
}

// chassisBlock returns the lines of `ovn-sbctl show` under the chassis name
// (up to the next chassis).
func chassisBlock(show, name string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(show, "\n") {
		if strings.HasPrefix(l, "Chassis ") {
			in = strings.Trim(strings.TrimPrefix(l, "Chassis "), `" `) == name
			if !in {
				continue
			}
		}
		if in {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
