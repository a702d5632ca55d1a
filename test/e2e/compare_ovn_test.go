//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// BenchmarkCompareOVN (issue 22) is `make compare-ovn`: in the lab's ovnk
// mode (the genuine OVN-Kubernetes), each case traced by the helper, then
// the same packet simulated by OVN's own ovn-trace on each node the
// helper's record names, then the same flow as real traffic. Per node it
// prints the logical flows both went through (stage and datapath) side by
// side, and both ends; at the end it counts the cases where both agree
// with each other and the verdict with real traffic. They agree on a node
// where every logical flow ovn-trace shows is on the helper's path, in
// the same order, and both end alike: ovn-trace leaves out the stages
// where the packet met only the stage's default flow (priority 0,
// "next;"), and the helper reports every OpenFlow table the probe passed. A report, not a test: it asserts nothing. Run it with
//
//	make compare-ovn   (TFLAB_CNI=ovnk go test -tags e2e -run '^$' -bench CompareOVN -benchtime 1x ./test/e2e)
//
// ovn-trace simulates one zone's logical network from its node's SB (in
// interconnect each node is a zone of its own): on the sender it starts
// at the source pod's port; on the receiver at the cluster router's port
// on the transit switch, where the packet comes in from the other zone
// (the helper's hops on the transit switch before it are left out there).
// Conntrack is simulated as a new connection (--ct=new), and a Service's
// endpoint is the one the helper's probe reached (--lb-dst). The transit
// switch's egress stages, which ovn-trace shows on the sender, run on the
// receiver (a switch's egress pipeline runs where the output port is
// bound): they are left out of the sender's simulation.
func BenchmarkCompareOVN(b *testing.B) {
	if lab.setupErr != "" {
		b.Skip(lab.setupErr)
	}
	if labMode() != modeOVNK {
		b.Fatalf("compare-ovn needs the lab's ovnk mode (TFLAB_CNI=ovnk), not %s", labMode())
	}
	out := os.Stdout
	cases := ovnCompareCases(b)
	fmt.Fprintf(out, "\ncompare-ovn: %d cases; each traced by the helper, then simulated by ovn-trace on each node, then real traffic\n", len(cases))
	agreed, verdicts := 0, 0
	for i, c := range cases {
		row := c.compare(b)
		row.print(out, i+1, len(cases))
		if row.verdictAgrees {
			verdicts++
		}
		if row.agrees() {
			agreed++
		}
	}
	fmt.Fprintf(out, "\ncompare-ovn: the helper's verdict is real traffic's in %d of %d cases; helper and ovn-trace agree on every node (ovn-trace's stages on the helper's path in order, the same end) in %d of %d\n",
		verdicts, len(cases), agreed, len(cases))
}

// ovnCompareCase is one packet to compare.
type ovnCompareCase struct {
	name     string
	ns       string
	src, dst string // the plugin's SRC and DST
	p        probe
	// leaves: the destination is outside the pod network, which real
	// traffic reaches (ForwardedOutOfNetwork is the verdict it calls for).
	leaves bool
}

func ovnCompareCases(b *testing.B) []ovnCompareCase {
	f := getTraceFixture(b)
	ns := f.ns
	_, selfIP := selfService(b, ns)
	webIP := strings.TrimSpace(mustKubectl(b, "get", "service", "-n", ns, "web", "-o", "jsonpath={.spec.clusterIP}"))
	ip := func(pod string) string { return f.pods[pod].Status.PodIP }
	pns, _, pips := ovnkPolicyFixture(b)
	return []ovnCompareCase{
		{"intra-node TCP 80", ns, "a", "c", probe{ns, "a", "tcp", ip("c"), 80}, false},
		{"intra-node UDP 5000", ns, "a", "c", probe{ns, "a", "udp", ip("c"), 5000}, false},
		{"intra-node ICMP", ns, "a", "c", probe{ns, "a", "icmp", ip("c"), 0}, false},
		{"inter-node TCP 80", ns, "a", "b", probe{ns, "a", "tcp", ip("b"), 80}, false},
		{"inter-node UDP 5000", ns, "a", "b", probe{ns, "a", "udp", ip("b"), 5000}, false},
		{"inter-node ICMP", ns, "a", "b", probe{ns, "a", "icmp", ip("b"), 0}, false},
		{"Service, endpoint on node 2", ns, "a", "svc/web", probe{ns, "a", "tcp", webIP, 80}, false},
		{"hairpin Service (node 2)", ns, "self", "svc/self", probe{ns, "self", "tcp", selfIP, 80}, false},
		{"NetworkPolicy ingress drop", ns, "a", "locked", probe{ns, "a", "tcp", ip("locked"), 80}, false},
		{"AdminNetworkPolicy deny", pns, "a", "b", probe{pns, "a", "tcp", pips["b"], 8080}, false},
		{"AdminNetworkPolicy pass, NetworkPolicy drop", pns, "a", "p", probe{pns, "a", "tcp", pips["p"], 8081}, false},
		{"BaselineAdminNetworkPolicy deny", pns, "a", "e", probe{pns, "a", "tcp", pips["e"], 8082}, false},
		{"namespace default deny", pns, "a", "d", probe{pns, "a", "tcp", pips["d"], 80}, false},
		{"NetworkPolicy egress drop", pns, "x", "b", probe{pns, "x", "tcp", pips["b"], 80}, false},
		{"EgressFirewall deny", pns, "a", labHostIP, probe{pns, "a", "icmp", labHostIP, 0}, false},
		// Issue 22's done-when 4: out of the pod network (the next hop's
		// MAC learned first, as TestOVNKNodeAndOutside says why), and a
		// node's own traffic (its real traffic sent by the node itself).
		{"pod to the other node's IP", ns, "a", "node/" + labNodes[1].name, probe{ns, "a", "icmp", labNodes[1].ip, 0}, true},
		{"pod to the lab's host", ns, "a", labHostIP, probe{ns, "a", "icmp", labHostIP, 0}, true},
		{"node to a pod on the other node", ns, "node/" + labNodes[0].name, "b", probe{ns, "", "tcp", ip("b"), 80}, false},
		{"node to its own pod", ns, "node/" + labNodes[0].name, "c", probe{ns, "", "tcp", ip("c"), 80}, false},
	}
}

// ovnStep is one logical flow stage a packet went through.
type ovnStep struct {
	datapath, stage string
}

func (s ovnStep) String() string { return s.stage + " (" + s.datapath + ")" }

// ovnNodeCompare is one node's two accounts.
type ovnNodeCompare struct {
	node                string
	helper, sim         []ovnStep
	helperEnd, simEnd   string
	simCmd, simErr      string
	stepsAgree, endsAgr bool
}

type ovnCompareRow struct {
	c             ovnCompareCase
	verdict       string
	real          outcome
	verdictAgrees bool
	nodes         []ovnNodeCompare
}

func (r ovnCompareRow) agrees() bool {
	if len(r.nodes) == 0 {
		return false
	}
	for _, n := range r.nodes {
		if !n.stepsAgree || !n.endsAgr {
			return false
		}
	}
	return true
}

// compare traces c with the helper, simulates it with ovn-trace on each
// node of the helper's record, and sends it as real traffic.
func (c ovnCompareCase) compare(b *testing.B) ovnCompareRow {
	b.Helper()
	args := append([]string{"-n", c.ns, c.src, c.dst}, protoArgs(c.p)...)
	if strings.HasPrefix(c.dst, "svc/") {
		args = []string{"-n", c.ns, c.src, c.dst, "--tcp", "80"}
	}
	srcNode, fromNode := strings.CutPrefix(c.src, "node/")
	if c.leaves {
		waitTraffic(b, c.p, served)
	}
	r := runTrace(b, append(args, "--expect", "any")...)
	var real outcome
	if fromNode {
		real = nodeTraffic(b, srcNode, c.p)
	} else {
		real = realTraffic(b, c.p)
		srcNode = getPod(b, c.ns, c.src).Spec.NodeName
	}
	row := ovnCompareRow{c: c, real: real}
	switch got := terminalActions(r); {
	case len(got) == 1:
		row.verdict = string(got[0])
		row.verdictAgrees = got[0] == verdictFor[real]
	case len(got) == 0 && c.leaves && r.code == 0:
		// Out of the pod network: what real traffic served shows.
		row.verdict = string(report.ActionForwardedOutOfNetwork)
		row.verdictAgrees = real == served
	default:
		row.verdict = fmt.Sprintf("%v (exit %d)", got, r.code)
	}
	if r.record == nil {
		return row
	}
	dstIP := c.p.dst
	for _, res := range r.record.Status.Results {
		for _, o := range res.Observations {
			if o.TranslatedDstIP != "" {
				dstIP = o.TranslatedDstIP
			}
		}
	}
	for i, res := range r.record.Status.Results {
		n := ovnNodeCompare{node: res.Node}
		sender := i == 0
		for _, o := range res.Observations {
			if s, ok := helperStep(o); ok {
				n.helper = append(n.helper, s)
			}
		}
		if !sender {
			// The receiver's simulation starts at the router's port on
			// the transit switch: leave out the transit switch before it.
			for len(n.helper) > 0 && n.helper[0].datapath == "transit_switch" {
				n.helper = n.helper[1:]
			}
		}
		if len(res.Observations) > 0 {
			n.helperEnd = helperEnd(res.Observations[len(res.Observations)-1])
		}
		n.simCmd, n.sim, n.simEnd, n.simErr = simulate(b, c, srcNode, res.Node, sender, dstIP)
		if sender {
			// A switch's egress pipeline runs where its output port is
			// bound: the transit switch's, for a port of another zone, on
			// that zone's node, which ovn-trace of this zone shows here.
			var own []ovnStep
			for _, s := range n.sim {
				if s.datapath != "transit_switch" || !strings.HasPrefix(s.stage, "ls_out_") {
					own = append(own, s)
				}
			}
			n.sim = own
		}
		n.stepsAgree = n.simErr == "" && len(n.sim) > 0 && inOrder(n.sim, n.helper)
		n.endsAgr = n.simErr == "" && n.helperEnd == n.simEnd
		row.nodes = append(row.nodes, n)
	}
	return row
}

// inOrder reports whether every step of sub is in steps, in order.
func inOrder(sub, steps []ovnStep) bool {
	i := 0
	for _, s := range steps {
		if i < len(sub) && s == sub[i] {
			i++
		}
	}
	return i == len(sub)
}

var helperStepRE = regexp.MustCompile(`^(l[sr]_(?:in|out)_\S+) \((.+)\)$`)

// helperStep is the logical flow stage of a helper's hop, where OVN names
// it: "STAGE (DATAPATH)".
func helperStep(o report.Observation) (ovnStep, bool) {
	m := helperStepRE.FindStringSubmatch(o.ComponentInfo)
	if m == nil {
		return ovnStep{}, false
	}
	return ovnStep{datapath: m[2], stage: m[1]}, true
}

// helperEnd is a node's end in the words simulated ends are put in.
func helperEnd(o report.Observation) string {
	switch o.Action.Normalize() {
	case report.ActionDelivered:
		ns, pod, _ := strings.Cut(o.Pod, "/")
		return "output to " + ns + "_" + pod
	case report.ActionForwarded:
		if o.TunnelDstIP != "" {
			return "output to the other zone"
		}
	case report.ActionDropped:
		return "drop"
	case report.ActionForwardedOutOfNetwork:
		return "out of the network"
	}
	return string(o.Action.Normalize())
}

var (
	simDatapathRE = regexp.MustCompile(`^\s*(ingress|egress)\(dp="([^"]+)"`)
	simStageRE    = regexp.MustCompile(`^\s*\d+\. (\S+) \(.*, priority \d+, uuid [0-9a-f]{8}`)
	simOutputRE   = regexp.MustCompile(`/\* output to "([^"]+)", type "([^"]*)" \*/`)
)

// parseOVNTrace reads ovn-trace's detailed output: the logical flows in
// order, each under the datapath heading it is in, and its end.
func parseOVNTrace(text string) (steps []ovnStep, end string) {
	dp := ""
	end = "drop"
	for _, l := range strings.Split(text, "\n") {
		if m := simDatapathRE.FindStringSubmatch(l); m != nil {
			dp = m[2]
			continue
		}
		if m := simStageRE.FindStringSubmatch(l); m != nil {
			steps = append(steps, ovnStep{datapath: dp, stage: m[1]})
			continue
		}
		if m := simOutputRE.FindStringSubmatch(l); m != nil {
			switch m[2] {
			case "patch", "l3gateway":
				// A port between two logical datapaths: the packet goes
				// on in the peer's pipeline.
			case "":
				end = "output to " + m[1]
			case "remote":
				end = "output to the other zone"
			case "localnet":
				end = "out of the network"
			default:
				end = "output to " + m[1] + " (" + m[2] + ")"
			}
		}
	}
	return steps, end
}

// simulate runs ovn-trace on node for c's packet: from the source pod's
// port on the source's node (sender), from the cluster router's transit
// switch port elsewhere.
func simulate(b *testing.B, c ovnCompareCase, srcNode, node string, sender bool, dstIP string) (cmd string, steps []ovnStep, end, errText string) {
	nb := func(args ...string) (string, error) {
		out, err := runOnNode(node, append([]string{"ovn-nbctl", "--db=unix:/run/ovn/ovnnb_db.sock"}, args...)...)
		return strings.TrimSpace(out), err
	}
	var dp, inport, ethSrc, ethDst, srcIP string
	ttl := 64
	if sender {
		// A node's own traffic enters at its management port.
		dp, inport = node, c.ns+"_"+c.src
		if strings.HasPrefix(c.src, "node/") {
			inport = "k8s-" + node
		}
		addrs, err := nb("lsp-get-addresses", inport)
		if err != nil || len(strings.Fields(addrs)) < 2 {
			return "", nil, "", fmt.Sprintf("the source's port %s: %v %s", inport, err, addrs)
		}
		ethSrc, srcIP = strings.Fields(addrs)[0], strings.Split(strings.Fields(addrs)[1], "/")[0]
		mac, err := nb("get", "Logical_Router_Port", "rtos-"+node, "mac")
		if err != nil {
			return "", nil, "", fmt.Sprintf("the router's port to %s: %v %s", node, err, mac)
		}
		ethDst = strings.Trim(mac, `"`)
		if d := podOn(b, dstIP); d != "" && sameSubnet(addrs, dstIP) {
			if a, err := nb("lsp-get-addresses", d); err == nil && a != "" {
				ethDst = strings.Fields(a)[0]
			}
		}
	} else {
		dp, inport, ttl = "ovn_cluster_router", "rtots-"+node, 63
		from, err := nb("lsp-get-addresses", "tstor-"+srcNode)
		if err != nil || from == "" {
			return "", nil, "", fmt.Sprintf("the transit switch's port to %s: %v %s", srcNode, err, from)
		}
		ethSrc = strings.Fields(from)[0]
		mac, err := nb("get", "Logical_Router_Port", inport, "mac")
		if err != nil {
			return "", nil, "", fmt.Sprintf("the router's port %s: %v %s", inport, err, mac)
		}
		ethDst = strings.Trim(mac, `"`)
		if !strings.HasPrefix(c.src, "node/") {
			srcIP = getPod(b, c.ns, c.src).Status.PodIP
		} else {
			// The management port is in its own node's zone.
			mp, err := runOnNode(srcNode, "ovn-nbctl", "--db=unix:/run/ovn/ovnnb_db.sock", "lsp-get-addresses", "k8s-"+srcNode)
			if err != nil || len(strings.Fields(mp)) < 2 {
				return "", nil, "", fmt.Sprintf("the management port of %s: %v %s", srcNode, err, mp)
			}
			srcIP = strings.Split(strings.Fields(mp)[1], "/")[0]
		}
	}
	flow := fmt.Sprintf(`inport == "%s" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == %d`, inport, ethSrc, ethDst, srcIP, dstIP, ttl)
	switch c.p.proto {
	case "tcp":
		flow += fmt.Sprintf(" && tcp && tcp.src == 40000 && tcp.dst == %d && tcp.flags == 0x2", c.p.port)
	case "udp":
		flow += fmt.Sprintf(" && udp && udp.src == 40000 && udp.dst == %d", c.p.port)
	default:
		flow += " && icmp4 && icmp4.type == 8 && icmp4.code == 0"
	}
	args := []string{"ovn-trace", "--db=unix:/run/ovn/ovnsb_db.sock"}
	for i := 0; i < 8; i++ {
		args = append(args, "--ct=new")
	}
	if dstIP != c.p.dst && sender {
		args = append(args, fmt.Sprintf("--lb-dst=%s:%d", dstIP, c.p.port))
	}
	args = append(args, dp, flow)
	cmd = strings.Join(args[:len(args)-1], " ") + " '" + flow + "'"
	out, err := runOnNode(node, args...)
	if err != nil {
		return cmd, nil, "", fmt.Sprintf("%v: %s", err, lastLines(out, 5))
	}
	steps, end = parseOVNTrace(out)
	return cmd, steps, end, ""
}

// podOn is the logical port (NAMESPACE_POD) of the pod with ip, or "".
func podOn(b *testing.B, ip string) string {
	out, err := kubectl(b.Context(), "get", "pods", "-A", "--field-selector", "status.podIP="+ip, "-o", "jsonpath={range .items[*]}{.metadata.namespace}_{.metadata.name} {end}")
	if err != nil {
		return ""
	}
	f := strings.Fields(out)
	if len(f) != 1 {
		return ""
	}
	return f[0]
}

// sameSubnet: ip is on the switch of the port whose addresses are addrs
// ("MAC IP", as OVN-Kubernetes writes a pod's port; the lab's node
// switches are /24s).
func sameSubnet(addrs, ip string) bool {
	f := strings.Fields(addrs)
	if len(f) < 2 {
		return false
	}
	a, err1 := netip.ParseAddr(strings.Split(f[1], "/")[0])
	d, err2 := netip.ParseAddr(ip)
	if err1 != nil || err2 != nil {
		return false
	}
	p, _ := a.Prefix(24)
	return p.Contains(d)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// runOnNode runs a command in node's namespaces (lab.sh exec).
func runOnNode(node string, args ...string) (string, error) {
	out, err := exec.Command(labScript(), append([]string{"exec", node}, args...)...).CombinedOutput()
	return string(out), err
}

func (r ovnCompareRow) print(w io.Writer, i, n int) {
	fmt.Fprintf(w, "\n[%d/%d] %s: %s/%s -> %s (%s %d)\n", i, n, r.c.name, r.c.ns, r.c.src, r.c.dst, r.c.p.proto, r.c.p.port)
	callsFor := string(verdictFor[r.real])
	if r.c.leaves && r.real == served {
		callsFor = string(report.ActionForwardedOutOfNetwork)
	}
	fmt.Fprintf(w, "  helper: %s; real traffic: %s (calls for %s)\n", r.verdict, r.real, callsFor)
	for _, n := range r.nodes {
		fmt.Fprintf(w, "  %s: ovn-trace: %s\n", n.node, n.simCmd)
		if n.simErr != "" {
			fmt.Fprintf(w, "    ovn-trace failed: %s\n", n.simErr)
		}
		mark := func(ok bool) string {
			if ok {
				return "same"
			}
			return "DIFFERENT"
		}
		fmt.Fprintf(w, "    ends: helper %q, ovn-trace %q: %s\n", n.helperEnd, n.simEnd, mark(n.endsAgr))
		fmt.Fprintf(w, "    logical flow stages (%d helper, %d ovn-trace), ovn-trace's on the helper's path in order: %s\n", len(n.helper), len(n.sim), mark(n.stepsAgree))
		if !n.stepsAgree {
			printSteps(w, n.helper, n.sim)
		}
	}
}

// printSteps prints the steps of ovn-trace's (sim) that are not on the
// helper's path in their order, with the helper's steps around them.
func printSteps(w io.Writer, helper, sim []ovnStep) {
	i := 0
	for _, s := range sim {
		j := i
		for j < len(helper) && helper[j] != s {
			j++
		}
		if j == len(helper) {
			fmt.Fprintf(w, "      ovn-trace only: %s (after the helper's step %d of %d)\n", s, i, len(helper))
			continue
		}
		i = j + 1
	}
}
