//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
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

// ovnModes: both OVN modes, the lab's own OVN-Kubernetes imitation and the
// genuine one; helper traces in OVN's words hold in both.
var ovnModes = []string{modeOVN, modeOVNK}

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

// Done-when 3 (issue 11): a NetworkPolicy drop, traced by OVS and read back
// into logical flows by ovn-detrace (packaged with OVN), shows the ACL
// stage; the logical flow's stage-hint leads to the northbound ACL, whose
// external_ids OVN-Kubernetes-style name what it belongs to. A default-deny
// drop names the namespace (owner-type NetpolNamespace, as OVN-Kubernetes
// does), and the dropped pod's port is in the policy's port group, which
// names the NetworkPolicy (NAMESPACE:NAME).
func TestOVNPolicyDropSeenByDetrace(t *testing.T) {
	requireLab(t)
	ns := namespace(t, "detrace")
	node := labNodes[1].name
	apply(t, podSpec(ns, "server", node, map[string]string{"app": "server"})+
		podSpec(ns, "client", node, map[string]string{"role": "client"})+
		netpol{ns: ns, name: "only-8080", app: "server", types: []string{"Ingress"}, ingress: []string{tcpRule("", 8080)}}.yaml())
	pods := waitPods(t, ns, "server", "client")
	server, client := pods["server"].Status.PodIP, pods["client"].Status.PodIP
	waitTraffic(t, probe{ns, "client", "tcp", server, 80}, timedOut)
	waitTraffic(t, probe{ns, "client", "tcp", server, 8080}, served)

	ofport := strings.TrimSpace(nodeExec(t, node, "ovs-vsctl", "--bare", "--columns=ofport", "find", "Interface", "external_ids:iface-id="+ns+"_client"))
	flow := fmt.Sprintf("in_port=%s,tcp,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_ttl=64,tp_src=40000,tp_dst=80,tcp_flags=syn",
		ofport, ovnMAC(t, client), ovnMAC(t, server), client, server)
	out := nodeExec(t, node, "sh", "-c", fmt.Sprintf("ovs-appctl ofproto/trace br-int '%s' | ovn-detrace --ovnnb=%s --ovnsb=%s", flow, ovnNB, ovnSB))
	if !strings.Contains(out, "ls_out_acl") {
		t.Fatalf("ovn-detrace shows no ls_out_acl stage:\n%s", out)
	}
	// The dropping logical flow: the last ls_out_acl flow detrace names
	// with a drop; detrace reads its stage-hint back into the ACL below it.
	lflowRE := regexp.MustCompile(`(?m)Logical flow: table=\d+ \(ls_out_acl\), priority=\d+, match=\((.*)\), actions=\(([^)]*)\)\s*\n\s*\* ACL: (.*)$`)
	var match, aclLine string
	for _, m := range lflowRE.FindAllStringSubmatch(out, -1) {
		if strings.Contains(m[2], "drop") {
			match, aclLine = m[1], m[3]
		}
	}
	if match == "" || !strings.Contains(out, "Datapath actions: drop") {
		t.Fatalf("ovn-detrace shows no ls_out_acl drop read back into its ACL, ending in a datapath drop:\n%s", out)
	}
	t.Logf("dropped by the logical flow matching %q, from ACL %s", match, aclLine)
	// The same path by hand: the logical flow's stage-hint is the first 32
	// bits of the northbound ACL row's UUID.
	lflows := nodeExec(t, node, "ovn-sbctl", "--db", ovnSB, "--format=csv", "--data=bare", "--no-headings",
		"--columns=match,external_ids", "find", "Logical_Flow", "external_ids:stage-name=ls_out_acl")
	hintRE := regexp.MustCompile(`stage-hint=([0-9a-f]{8})`)
	var hint string
	for _, row := range strings.Split(lflows, "\n") {
		if strings.Contains(row, match) {
			if m := hintRE.FindStringSubmatch(row); m != nil {
				hint = m[1]
			}
		}
	}
	acls := nodeExec(t, node, "ovn-nbctl", "--db", ovnNB, "--columns=_uuid,action,external_ids", "--format=csv", "--data=bare", "--no-headings", "list", "ACL")
	found := false
	for _, row := range strings.Split(acls, "\n") {
		if hint != "" && strings.HasPrefix(row, hint) && strings.Contains(row, ",drop,") &&
			strings.Contains(row, "k8s.ovn.org/owner-type=NetpolNamespace") && strings.Contains(row, "k8s.ovn.org/name="+ns+" ") {
			found = true
			t.Logf("the ACL's northbound row: %s", row)
		}
	}
	if !found {
		t.Errorf("no drop ACL of namespace %s behind the logical flow's stage-hint %q:\nlogical flows:\n%s\nACLs:\n%s", ns, hint, lflows, acls)
	}
	// The policy behind the namespace's default deny: the NetworkPolicy
	// port group holding the dropped pod's port names it.
	pgs := nodeExec(t, node, "ovn-nbctl", "--db", ovnNB, "--bare", "--columns=ports", "find", "Port_Group",
		"external_ids:k8s.ovn.org/owner-type=NetworkPolicy", `external_ids:k8s.ovn.org/name="`+ns+`:only-8080"`)
	lsp := strings.TrimSpace(nodeExec(t, node, "ovn-nbctl", "--db", ovnNB, "--bare", "--columns=_uuid", "find", "Logical_Switch_Port", "name="+ns+"_server"))
	if lsp == "" || !strings.Contains(pgs, lsp) {
		t.Errorf("the port group of NetworkPolicy %s/only-8080 (ports %q) does not hold the server's port %q", ns, pgs, lsp)
	}
}

// ovnMAC is a pod's MAC as OVN-Kubernetes derives it: 0a:58: and the IPv4
// address's bytes.
func ovnMAC(t testing.TB, ip string) string {
	t.Helper()
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		t.Fatalf("pod IP %q is not IPv4", ip)
	}
	b := a.As4()
	return fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}
