package ofproto

import (
	"regexp"
	"strconv"
	"strings"
)

// Fate is what the datapath does with the packet in the end, as the last
// pass's "Datapath actions:" line of ofproto/trace states it. It is OVS's
// own verdict: the flows before it may have output, dropped or resubmitted
// in ways that cancel out (an output to the input port is skipped, a
// subroutine's table miss returns), the datapath actions are what remains.
type Fate struct {
	// Outputs are the datapath ports the packet leaves by, in order.
	Outputs []DPOutput
	// Recirc is true where the actions end in a recirculation the trace
	// did not follow (a dp_hash select group, conntrack the trace was not
	// asked to resume, a tunnel's decapsulation): the packet's fate is
	// decided in a later pass, so the verdict is still open.
	Recirc bool
	// Controller is true where the packet goes to an OpenFlow controller
	// (userspace(...controller(...))): the pipeline handed it to its agent,
	// which may reject it, answer it or drop it.
	Controller bool
	// Raw is the text parsed.
	Raw string
}

// DPOutput is one output of the datapath actions.
type DPOutput struct {
	// Port is the datapath port number (dpif/show maps it to a bridge
	// port). For a native tunnel's tnl_push it is the tunnel's port
	// (tnl_port), not the underlay port the encapsulated packet leaves by.
	Port uint32
	// TunnelDst is the tunnel's remote IP where the packet enters a
	// tunnel: from tnl_push's IP header (netdev), or the set(tunnel(dst=...))
	// in effect at the output (system: the kernel's tunnel metadata stays
	// set for the outputs after it, so it means a tunnel only where the
	// port is one).
	TunnelDst string
	// TunnelSrc is the local IP a set(tunnel(src=...)) in effect at the
	// output names (system only): with TunnelDst it tells apart the
	// tunnel ports that share one kernel vport (DatapathPorts.Output).
	TunnelSrc string
	// Underlay are the datapath ports the encapsulated packet of a
	// tnl_push leaves by (the underlay bridge's pipeline).
	Underlay []uint32
}

// Dropped reports whether the packet goes nowhere: no output, no
// recirculation, no controller. An empty line counts as a drop.
func (f Fate) Dropped() bool { return len(f.Outputs) == 0 && !f.Recirc && !f.Controller }

var (
	tnlDstRE  = regexp.MustCompile(`ipv[46]\(src=[^,()]*,dst=([^,()]+)`)
	tnlPortRE = regexp.MustCompile(`tnl_port\((\d+)\)`)
	setTunRE  = regexp.MustCompile(`(?:^|[(,])(?:ipv6_)?dst=([^,()]+)`)
	setSrcRE  = regexp.MustCompile(`(?:^|[(,])(?:ipv6_)?src=([^,()]+)`)
)

// ParseDatapathActions reads a "Datapath actions:" line (without the
// prefix), in the forms of both datapaths (see DatapathKind). It knows the
// actions that move the packet (port numbers, tnl_push, set(tunnel(...)),
// clone, a sample of 100%, check_pkt_len, recirc, tnl_pop,
// userspace(controller)) and skips the rest (set, push/pop, ct, hash,
// meter, trunc, psample, a sample of less ...), which modify or copy the
// packet on its way.
func ParseDatapathActions(s string) Fate {
	f := Fate{Raw: s}
	f.list(strings.TrimSpace(s), 0)
	return f
}

// maxNesting bounds recursion into clone(...) and check_pkt_len(...): OVS
// nests a few levels; the fuzzer nests thousands.
const maxNesting = 16

func (f *Fate) list(s string, depth int) {
	if depth > maxNesting {
		return
	}
	tunnel := -1 // index of the tnl_push whose underlay outputs follow
	setTunnelDst, setTunnelSrc := "", ""
	for _, a := range splitTop(s) {
		name, args, _ := strings.Cut(a, "(")
		args = strings.TrimSuffix(args, ")")
		switch {
		case isDigits(a):
			n, err := strconv.ParseUint(a, 10, 32)
			if err != nil {
				continue
			}
			if tunnel >= 0 {
				f.Outputs[tunnel].Underlay = append(f.Outputs[tunnel].Underlay, uint32(n))
				continue
			}
			f.Outputs = append(f.Outputs, DPOutput{Port: uint32(n), TunnelDst: setTunnelDst, TunnelSrc: setTunnelSrc})
		case name == "tnl_push":
			o := DPOutput{}
			if m := tnlPortRE.FindStringSubmatch(args); m != nil {
				n, _ := strconv.ParseUint(m[1], 10, 32)
				o.Port = uint32(n)
			}
			if m := tnlDstRE.FindStringSubmatch(args); m != nil {
				o.TunnelDst = m[1]
			}
			f.Outputs = append(f.Outputs, o)
			tunnel = len(f.Outputs) - 1
		case name == "set" && strings.HasPrefix(args, "tunnel("):
			tun := strings.TrimPrefix(args, "tunnel(")
			if m := setTunRE.FindStringSubmatch(tun); m != nil {
				setTunnelDst = m[1]
			}
			// A set(tunnel(...)) replaces the whole tunnel key: a source
			// it does not name is unset.
			setTunnelSrc = ""
			if m := setSrcRE.FindStringSubmatch(tun); m != nil {
				setTunnelSrc = m[1]
			}
		case name == "clone":
			// A clone's actions apply to a copy; what follows applies to
			// the packet as it was.
			f.list(args, depth+1)
		case name == "sample":
			// sample(sample=P%,actions(...)): at 100% the actions always
			// apply, to a copy, as a clone's do. OVS writes a metered
			// controller action so (OVN meters them), and a clone where
			// the kernel has no clone action. A lesser probability is
			// sFlow or IPFIX sampling, no fate of the packet.
			if inner, ok := strings.CutPrefix(args, "sample=100.0%,actions("); ok {
				f.list(strings.TrimSuffix(inner, ")"), depth+1)
			}
		case name == "check_pkt_len":
			// size=N,gt(...),le(...): the probe is small, so it takes le.
			for _, b := range splitTop(args) {
				if inner, ok := strings.CutPrefix(b, "le("); ok {
					f.list(strings.TrimSuffix(inner, ")"), depth+1)
				}
			}
		case name == "recirc", name == "tnl_pop":
			f.Recirc = true
		case name == "userspace" && strings.Contains(args, "controller("):
			f.Controller = true
		}
	}
}

// splitTop splits a comma-separated action list at the commas that are
// not inside parentheses.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if rest := strings.TrimSpace(s[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
