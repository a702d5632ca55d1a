//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// BenchmarkCompareOVN (issue 22) is `make compare-ovn`: in the lab's ovnk
// mode (the genuine OVN-Kubernetes), each case traced by the helper, then
// the same packet simulated by OVN's own ovn-trace on each node the
// helper's record names, then the same flow as real traffic. Per node it
// prints the logical flows both went through (stage, datapath and the
// flow's UUID prefix, which is the cookie of the OpenFlow flows
// ovn-controller made of it) side by side, and both ends; at the end it
// counts the cases where both agree with each other and the verdict with
// real traffic. A report, not a test: it asserts nothing. Run it with
//
//	make compare-ovn   (TFLAB_CNI=ovnk go test -tags e2e -run '^$' -bench CompareOVN -benchtime 1x ./test/e2e)
//
// ovn-trace simulates one zone's logical network from its node's SB (in
// interconnect each node is a zone of its own): on the sender it starts
// at the source pod's port; on the receiver at the cluster router's port
// on the transit switch, where the packet comes in from the other zone
// (the helper's hops on the transit switch before it are left out there).
// Conntrack is simulated as a new connection (--ct=new), and a Service's
// endpoint is the one the helper's probe reached (--lb-dst).
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
	fmt.Fprintf(out, "\ncompare-ovn: the helper's verdict is real traffic's in %d of %d cases; helper and ovn-trace agree on every node (the same logical flows in the same order, the same end) in %d of %d\n",
		verdicts, len(cases), agreed, len(cases))
}

// ovnCompareCase is one packet to compare.
type ovnCompareCase struct {
	name     string
	ns       string
	src, dst string // the plugin's SRC and DST
	p        probe
}

func ovnCompareCases(b *testing.B) []ovnCompareCase {
	f := getTraceFixture(b)
	ns := f.ns
	_, selfIP := selfService(b, ns)
	webIP := strings.TrimSpace(mustKubectl(b, "get", "service", "-n", ns, "web", "-o", "jsonpath={.spec.clusterIP}"))
	ip := func(pod string) string { return f.pods[pod].Status.PodIP }
	pns, _, pips := ovnkPolicyFixture(b)
	return []ovnCompareCase{
		{"intra-node TCP 80", ns, "a", "c", probe{ns, "a", "tcp", ip("c"), 80}},
		{"intra-node UDP 5000", ns, "a", "c", probe{ns, "a", "udp", ip("c"), 5000}},
		{"intra-node ICMP", ns, "a", "c", probe{ns, "a", "icmp", ip("c"), 0}},
		{"inter-node TCP 80", ns, "a", "b", probe{ns, "a", "tcp", ip("b"), 80}},
		{"inter-node UDP 5000", ns, "a", "b", probe{ns, "a", "udp", ip("b"), 5000}},
		{"inter-node ICMP", ns, "a", "b", probe{ns, "a", "icmp", ip("b"), 0}},
		{"Service, endpoint on node 2", ns, "a", "svc/web", probe{ns, "a", "tcp", webIP, 80}},
		{"hairpin Service (node 2)", ns, "self", "svc/self", probe{ns, "self", "tcp", selfIP, 80}},
		{"NetworkPolicy ingress drop", ns, "a", "locked", probe{ns, "a", "tcp", ip("locked"), 80}},
		{"AdminNetworkPolicy deny", pns, "a", "b", probe{pns, "a", "tcp", pips["b"], 8080}},
		{"AdminNetworkPolicy pass, NetworkPolicy drop", pns, "a", "p", probe{pns, "a", "tcp", pips["p"], 8081}},
		{"BaselineAdminNetworkPolicy deny", pns, "a", "e", probe{pns, "a", "tcp", pips["e"], 8082}},
		{"namespace default deny", pns, "a", "d", probe{pns, "a", "tcp", pips["d"], 80}},
		{"NetworkPolicy egress drop", pns, "x", "b", probe{pns, "x", "tcp", pips["b"], 80}},
		{"EgressFirewall deny", pns, "a", labHostIP, probe{pns, "a", "icmp", labHostIP, 0}},
	}
}

// ovnStep is one logical flow a packet went through.
type ovnStep struct {
	datapath, stage, uuid string
}

func (s ovnStep) String() string { return s.stage + " (" + s.datapath + ") " + s.uuid }

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
	r := runTrace(b, append(args, "--expect", "any")...)
	real := realTraffic(b, c.p)
	row := ovnCompareRow{c: c, real: real}
	if got := terminalActions(r); len(got) == 1 {
		row.verdict = string(got[0])
		row.verdictAgrees = got[0] == verdictFor[real]
	} else {
		row.verdict = fmt.Sprintf("%v (exit %d)", got, r.code)
	}
	if r.record == nil {
		return row
	}
	src := getPod(b, c.ns, c.src)
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
		for _, h := range res.TableHops {
			if s, ok := helperStep(h); ok {
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
		n.simCmd, n.sim, n.simEnd, n.simErr = simulate(b, c, src.Spec.NodeName, res.Node, sender, dstIP)
		n.stepsAgree = n.simErr == "" && stepsEqual(n.helper, n.sim)
		n.endsAgr = n.simErr == "" && n.helperEnd == n.simEnd
		row.nodes = append(row.nodes, n)
	}
	return row
}

func stepsEqual(a, b []ovnStep) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// helperStep is the logical flow of a helper's hop, where OVN names it:
// its stage, its datapath ("STAGE (DATAPATH)") and its cookie.
func helperStep(h report.TableHop) (ovnStep, bool) {
	if h.TableName == "" || !strings.HasPrefix(h.ComponentInfo, h.TableName+" (") {
		return ovnStep{}, false
	}
	c, err := strconv.ParseUint(strings.TrimPrefix(h.Cookie, "0x"), 16, 64)
	if err != nil || c == 0 || c>>32 != 0 {
		return ovnStep{}, false
	}
	dp := strings.TrimSuffix(strings.TrimPrefix(h.ComponentInfo, h.TableName+" ("), ")")
	return ovnStep{datapath: dp, stage: h.TableName, uuid: fmt.Sprintf("%08x", c)}, true
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
	simStageRE    = regexp.MustCompile(`^\s*\d+\. (\S+) \(.*, priority \d+, uuid ([0-9a-f]{8})`)
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
			steps = append(steps, ovnStep{datapath: dp, stage: m[1], uuid: m[2]})
			continue
		}
		if m := simOutputRE.FindStringSubmatch(l); m != nil {
			switch m[2] {
			case "":
				end = "output to " + m[1]
			case "remote":
				end = "output to the other zone"
			case "l3gateway", "localnet", "patch":
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
	var dp, inport, ethSrc, ethDst string
	ttl := 64
	if sender {
		dp, inport = node, c.ns+"_"+c.src
		addrs, err := nb("lsp-get-addresses", inport)
		if err != nil || addrs == "" {
			return "", nil, "", fmt.Sprintf("the source's port %s: %v %s", inport, err, addrs)
		}
		ethSrc = strings.Fields(addrs)[0]
		ethDst = mustMAC(nb("get", "Logical_Router_Port", "rtos-"+node, "mac"))
		if d := podOn(b, c.ns, dstIP); d != "" && sameSubnet(addrs, dstIP) {
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
		ethDst = mustMAC(nb("get", "Logical_Router_Port", inport, "mac"))
	}
	srcIP := getPod(b, c.ns, c.src).Status.PodIP
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

func mustMAC(s string, err error) string {
	if err != nil {
		return "00:00:00:00:00:00"
	}
	return strings.Trim(s, `"`)
}

// podOn is the logical port (NAMESPACE_POD) of the pod with ip, or "".
func podOn(b *testing.B, ns, ip string) string {
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
	fmt.Fprintf(w, "  helper: %s; real traffic: %s (calls for %s)\n", r.verdict, r.real, verdictFor[r.real])
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
		fmt.Fprintf(w, "    logical flows (%d helper, %d ovn-trace): %s\n", len(n.helper), len(n.sim), mark(n.stepsAgree))
		if !n.stepsAgree {
			printSteps(w, n.helper, n.sim)
		}
	}
}

// printSteps prints two step lists side by side, aligned on their longest
// common subsequence; a step only one side has is marked with its side.
func printSteps(w io.Writer, a, b []ovnStep) {
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			fmt.Fprintf(w, "      both       %s\n", a[i])
			i, j = i+1, j+1
		case j >= len(b) || (i < len(a) && lcs[i+1][j] >= lcs[i][j+1]):
			fmt.Fprintf(w, "      helper     %s\n", a[i])
			i++
		default:
			fmt.Fprintf(w, "      ovn-trace  %s\n", b[j])
			j++
		}
	}
}
