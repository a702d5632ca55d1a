// Package ofproto asks ovs-vswitchd for its own trace of a packet
// (ofproto/trace over the daemon's unixctl socket, JSON-RPC) and parses the
// text into hops: the table, the flow that matched, its cookie and actions,
// how deeply the table was called, and the datapath's final actions.
package ofproto

import (
	"bufio"
	"regexp"
	"strconv"
	"strings"
)

// Hop is one table visit in OVS's trace.
type Hop struct {
	// Table is the table id.
	Table uint8 `json:"table"`
	// Match is the flow's match as OVS prints it ("ip,in_port=1"); empty
	// for a flow that matches everything.
	Match string `json:"match,omitempty"`
	// Priority and Cookie identify the flow together with Table and Match.
	Priority uint16 `json:"priority"`
	Cookie   uint64 `json:"cookie"`
	// NoMatch is true where no flow matched. At depth 0 that ends the pass
	// (a table miss drops in OpenFlow 1.5); deeper, the called table
	// returns to its caller, which goes on.
	NoMatch bool `json:"noMatch,omitempty"`
	// Actions are the action lines OVS printed under the flow, with the
	// remarks ("-> output port is 3", ">> ...") that follow them; lines of
	// tables it calls belong to those tables' hops.
	Actions []string `json:"actions,omitempty"`
	// Pass counts recirculations before this hop (conntrack): 0 for the
	// first pass through the pipeline.
	Pass int `json:"pass,omitempty"`
	// Depth is how deeply the table was called within its bridge section:
	// 0 on the pipeline's main path (goto_table, and a resubmit that is
	// its flow's last action, which OVS prints as a tail call), 1 and more
	// inside a resubmit that returns to its caller, a clone or a group
	// bucket.
	Depth int `json:"depth,omitempty"`
	// Bridge is the bridge("...") section the hop is in.
	Bridge string `json:"bridge,omitempty"`
	// InPort is the in_port of the pass ("1", or a name), the port an
	// IN_PORT action sends to.
	InPort string `json:"inPort,omitempty"`
}

// Trace is a parsed ofproto/trace.
type Trace struct {
	// Bridge is the bridge the packet entered.
	Bridge string
	// Hops are the traced bridge's hops in the order OVS executed them.
	Hops []Hop
	// Elsewhere are hops in other bridges: the underlay bridge a native
	// tunnel goes through (bridge("br-phy")), a patch port's peer. They are
	// not the traced bridge's path but explain where the packet went.
	Elsewhere []Hop
	// DatapathActions is the last pass's "Datapath actions:" line: what the
	// datapath really does with the packet (see ParseDatapathActions).
	DatapathActions string
	// TunnelDst is where a native tunnel output sends the packet, if any.
	TunnelDst string
	// Passes counts the datapath passes OVS traced (1 + recirculations).
	Passes int
	// Ports maps the datapath's port numbers to bridge ports, where the
	// trace was asked for with Client.Trace (dpif/show).
	Ports DatapathPorts
	// Text is what OVS printed.
	Text string
}

var (
	// " 0. ip,in_port=1, priority 100, cookie 0x5" or "10. priority 0"
	hopRE     = regexp.MustCompile(`^(\d+)\. (?:(.*?)(?:, )?)?priority (\d+)(?:, cookie (0x[0-9a-f]+))?\s*$`)
	noMatchRE = regexp.MustCompile(`^(\d+)\. No match\.?\s*$`)
	tunnelRE  = regexp.MustCompile(`-> tunneling to (\S+) via`)
	bridgeRE  = regexp.MustCompile(`^bridge\("(.*)"\)\s*$`)
	inPortRE  = regexp.MustCompile(`(?:^|,)in_port=([^,\s]+)`)
	// "recirc(0x1b69) - resume conntrack with default ct_state=trk|new"
	resumeRE = regexp.MustCompile(`^recirc\((0x[0-9a-f]+)\) - `)
)

// section is a bridge("...") section being read. OVS indents what a flow
// calls four columns deeper than the flow and prints a section's tables
// at one indentation (table), so a line left of it has returned to the
// section that called this one.
type section struct {
	bridge string
	header int
	table  int // indentation of the section's tables; -1 until the first
	// open holds the hops whose actions may still follow, innermost last.
	open []openHop
}

// openHop is a hop of Trace.Hops (ours) or Trace.Elsewhere, by index.
type openHop struct {
	ours   bool
	idx    int
	indent int
}

// Parse reads the text of ofproto/trace of a packet entering bridge. Hops
// in other bridges go to Elsewhere. It never fails: text it does not
// understand is kept in Text and otherwise ignored.
func Parse(text, bridge string) Trace {
	t := Trace{Bridge: bridge, Text: text}
	p := parser{t: &t, bridge: bridge, resumed: map[string]bool{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		p.line(sc.Text())
	}
	t.Passes = p.pass + 1
	return t
}

type parser struct {
	t        *Trace
	bridge   string
	pass     int
	seenFlow bool
	inPort   string
	sections []*section
	// resumed are the recirculations already followed. A datapath action
	// list can hold one recirculation twice (both branches of
	// check_pkt_len, OVN's test of a packet against the MTU, end in the
	// same recirc), and OVS's trace then follows it twice; a recirc id
	// names one frozen state, so the second is the first again, word for
	// word, and the packet takes it once: it is skipped.
	resumed map[string]bool
	// skipping is true while in a recirculation already followed.
	skipping bool
}

// between reads a line at the left margin that is not in a bridge
// section (a pass's flow, its datapath actions, a recirculation's header)
// and reports whether it was one.
func (p *parser) between(line string) bool {
	if m := resumeRE.FindStringSubmatch(line); m != nil {
		p.skipping = p.resumed[m[1]]
		p.resumed[m[1]] = true
		p.sections = nil
		return true
	}
	if p.skipping {
		return true
	}
	switch {
	case strings.HasPrefix(line, "Flow:"):
		if p.seenFlow {
			p.pass++
		}
		p.seenFlow = true
		p.inPort = ""
		if m := inPortRE.FindStringSubmatch(strings.TrimPrefix(line, "Flow:")); m != nil {
			p.inPort = m[1]
		}
		p.sections = nil
		return true
	case strings.HasPrefix(line, "Datapath actions:"):
		p.t.DatapathActions = strings.TrimSpace(strings.TrimPrefix(line, "Datapath actions:"))
		p.sections = nil
		return true
	case strings.HasPrefix(line, "Final flow:"), strings.HasPrefix(line, "Megaflow:"):
		p.sections = nil
		return true
	}
	return false
}

func (p *parser) line(line string) {
	trimmed := strings.TrimSpace(line)
	if trimmed == "" || strings.HasPrefix(trimmed, "---") || strings.HasPrefix(trimmed, "===") {
		return
	}
	indent := len(line) - len(strings.TrimLeft(line, " "))
	if indent == 0 && p.between(line) {
		return
	}
	if p.skipping {
		return
	}
	if m := tunnelRE.FindStringSubmatch(line); m != nil {
		p.t.TunnelDst = m[1]
	}
	// Leave the sections this line is left of: their caller goes on.
	for len(p.sections) > 0 {
		s := p.sections[len(p.sections)-1]
		if indent < s.header || (s.table >= 0 && indent < s.table) {
			p.sections = p.sections[:len(p.sections)-1]
			continue
		}
		break
	}
	if m := bridgeRE.FindStringSubmatch(trimmed); m != nil {
		p.sections = append(p.sections, &section{bridge: m[1], header: indent, table: -1})
		return
	}
	if len(p.sections) == 0 {
		// Lines between passes ("recirc(0x1) - resume conntrack ...").
		return
	}
	s := p.sections[len(p.sections)-1]
	if h, ok := parseHop(trimmed); ok {
		// "%2d. " right-aligns one-digit tables: " 0." sits at column 0.
		ti := indent
		if d := len(trimmed) - len(strings.TrimLeft(trimmed, "0123456789")); d < 2 {
			ti -= 2 - d
		}
		if s.table < 0 {
			s.table = ti
		}
		h.Depth = max(0, (ti-s.table)/4)
		h.Bridge, h.Pass, h.InPort = s.bridge, p.pass, p.inPort
		for len(s.open) > 0 && s.open[len(s.open)-1].indent >= ti {
			s.open = s.open[:len(s.open)-1]
		}
		o := p.add(h, s.bridge == p.bridge)
		o.indent = ti
		s.open = append(s.open, o)
		return
	}
	for len(s.open) > 0 && s.open[len(s.open)-1].indent >= indent {
		s.open = s.open[:len(s.open)-1]
	}
	if len(s.open) > 0 {
		h := p.hop(s.open[len(s.open)-1])
		h.Actions = append(h.Actions, trimmed)
	}
}

// add appends a hop to the traced bridge's path or to Elsewhere.
func (p *parser) add(h Hop, ours bool) openHop {
	if ours {
		p.t.Hops = append(p.t.Hops, h)
		return openHop{ours: true, idx: len(p.t.Hops) - 1}
	}
	p.t.Elsewhere = append(p.t.Elsewhere, h)
	return openHop{idx: len(p.t.Elsewhere) - 1}
}

func (p *parser) hop(o openHop) *Hop {
	if o.ours {
		return &p.t.Hops[o.idx]
	}
	return &p.t.Elsewhere[o.idx]
}

func parseHop(s string) (Hop, bool) {
	if m := noMatchRE.FindStringSubmatch(s); m != nil {
		tbl, err := strconv.ParseUint(m[1], 10, 8)
		return Hop{Table: uint8(tbl), NoMatch: true}, err == nil
	}
	m := hopRE.FindStringSubmatch(s)
	if m == nil {
		return Hop{}, false
	}
	tbl, err := strconv.ParseUint(m[1], 10, 8)
	if err != nil {
		return Hop{}, false
	}
	prio, _ := strconv.ParseUint(m[3], 10, 16)
	h := Hop{Table: uint8(tbl), Match: strings.TrimSuffix(m[2], ","), Priority: uint16(prio)}
	if m[4] != "" {
		h.Cookie, _ = strconv.ParseUint(strings.TrimPrefix(m[4], "0x"), 16, 64)
	}
	return h, true
}
