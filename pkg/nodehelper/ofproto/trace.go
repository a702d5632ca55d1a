// Package ofproto asks ovs-vswitchd for its own trace of a packet
// (ofproto/trace over the daemon's unixctl socket, JSON-RPC) and parses the
// text into hops: the table, the flow that matched, its cookie and actions.
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
	// NoMatch is true where no flow matched (a table miss drops in OpenFlow 1.5).
	NoMatch bool `json:"noMatch,omitempty"`
	// Actions are the action lines OVS printed under the flow.
	Actions []string `json:"actions,omitempty"`
	// Pass counts recirculations before this hop (conntrack): 0 for the
	// first pass through the pipeline.
	Pass int `json:"pass,omitempty"`
}

// Trace is a parsed ofproto/trace.
type Trace struct {
	Hops []Hop
	// DatapathActions is the last "Datapath actions:" line (the final verdict).
	DatapathActions string
	// TunnelDst is where a native tunnel output sends the packet, if any.
	TunnelDst string
	// Text is what OVS printed.
	Text string
}

var (
	// " 0. ip,in_port=1, priority 100, cookie 0x5" or "10. priority 0"
	hopRE     = regexp.MustCompile(`^(\s*)(\d+)\. (?:(.*?)(?:, )?)?priority (\d+)(?:, cookie (0x[0-9a-f]+))?\s*$`)
	noMatchRE = regexp.MustCompile(`^\s*(\d+)\. No match\.?\s*$`)
	tunnelRE  = regexp.MustCompile(`-> tunneling to (\S+) via`)
)

var bridgeRE = regexp.MustCompile(`^\s*bridge\("(.*)"\)\s*$`)

// Parse reads the text of ofproto/trace of a packet entering bridge. Hops
// in other bridges (the underlay bridge a native tunnel goes through, patch
// ports) are not the bridge's and are left out.
func Parse(text, bridge string) Trace {
	t := Trace{Text: text}
	pass := 0
	inBridge := true
	var cur *Hop
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "Datapath actions:"):
			t.DatapathActions = strings.TrimSpace(strings.TrimPrefix(line, "Datapath actions:"))
			cur = nil
		case strings.HasPrefix(line, "Flow:") && len(t.Hops) > 0:
			pass++
			cur = nil
		case strings.HasPrefix(line, "Final flow:"), strings.HasPrefix(line, "Megaflow:"):
			cur = nil
		}
		if m := bridgeRE.FindStringSubmatch(line); m != nil {
			inBridge = m[1] == bridge
			cur = nil
			continue
		}
		if strings.HasPrefix(trimmed, "---") {
			continue
		}
		if m := tunnelRE.FindStringSubmatch(line); m != nil {
			t.TunnelDst = m[1]
		}
		if !inBridge {
			continue
		}
		if m := noMatchRE.FindStringSubmatch(line); m != nil {
			tbl, _ := strconv.Atoi(m[1])
			t.Hops = append(t.Hops, Hop{Table: uint8(tbl), NoMatch: true, Pass: pass}) //nolint:gosec // table ids < 256
			cur = &t.Hops[len(t.Hops)-1]
			continue
		}
		if m := hopRE.FindStringSubmatch(line); m != nil {
			tbl, _ := strconv.Atoi(m[2])
			prio, _ := strconv.Atoi(m[4])
			h := Hop{Table: uint8(tbl), Match: strings.TrimSuffix(m[3], ","), Priority: uint16(prio), Pass: pass} //nolint:gosec // OVS prints valid ids
			if m[5] != "" {
				h.Cookie, _ = strconv.ParseUint(strings.TrimPrefix(m[5], "0x"), 16, 64)
			}
			t.Hops = append(t.Hops, h)
			cur = &t.Hops[len(t.Hops)-1]
			continue
		}
		if cur != nil && trimmed != "" {
			cur.Actions = append(cur.Actions, trimmed)
		}
	}
	return t
}

// Outputs lists the OpenFlow ports a hop outputs to: "output:3", or for
// an output to a register ("output:NXM_NX_REG1[]") the port OVS resolved
// it to ("-> output port is 3").
func (h Hop) Outputs() []string {
	var out []string
	for _, a := range h.Actions {
		if p, ok := strings.CutPrefix(a, "output:"); ok && !strings.Contains(p, "[") {
			out = append(out, p)
		}
		if p, ok := strings.CutPrefix(a, "-> output port is "); ok {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}

// Drops reports whether OVS dropped the packet in this hop: a table miss,
// or a flow whose only action is drop.
func (h Hop) Drops() bool {
	if h.NoMatch {
		return true
	}
	return len(h.Actions) == 0 || (len(h.Actions) == 1 && h.Actions[0] == "drop")
}

// Dropped reports whether the datapath drops the packet in the end.
func (t Trace) Dropped() bool { return t.DatapathActions == "" || t.DatapathActions == "drop" }
