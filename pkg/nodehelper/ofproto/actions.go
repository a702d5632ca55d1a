package ofproto

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// ofppLocal is OpenFlow's LOCAL port, the bridge's own internal port, as
// OVSDB numbers it.
const ofppLocal = "65534"

// Outputs lists the OpenFlow ports a hop outputs to: "output:3"; for an
// output to a register ("output:NXM_NX_REG1[]") the port OVS resolved it
// to ("-> output port is 3"); IN_PORT as the pass's in_port (hairpin);
// LOCAL as 65534. An output OVS skipped (">> skipping output to input
// port", ">> Nonexistent output port") is not one.
func (h Hop) Outputs() []string {
	var out []string
	for i, a := range h.Actions {
		if i+1 < len(h.Actions) && skipped(h.Actions[i+1]) {
			continue
		}
		p, ok := strings.CutPrefix(a, "output:")
		if !ok {
			p, ok = strings.CutPrefix(a, "-> output port is ")
		}
		if !ok && (a == "IN_PORT" || a == "LOCAL") {
			p, ok = a, true
		}
		if !ok || strings.Contains(p, "[") {
			continue
		}
		p = strings.Trim(strings.TrimSpace(p), `"`)
		switch p {
		case "IN_PORT":
			if h.InPort == "" {
				continue
			}
			p = h.InPort
		case "LOCAL":
			p = ofppLocal
		}
		out = append(out, p)
	}
	return out
}

func skipped(remark string) bool {
	return strings.HasPrefix(remark, ">> skipping output to input port") ||
		strings.HasPrefix(remark, ">> Nonexistent output port")
}

// Drops reports whether the packet's path ends in this hop: a flow whose
// only action is drop (or that has none), or a table miss on the main
// path (depth 0). A miss in a table called with resubmit returns to the
// caller and is not a drop.
func (h Hop) Drops() bool {
	if h.NoMatch {
		return h.Depth == 0
	}
	return len(h.Actions) == 0 || (len(h.Actions) == 1 && h.Actions[0] == "drop")
}

// Dropped reports whether the datapath drops the packet in the end.
func (t Trace) Dropped() bool { return ParseDatapathActions(t.DatapathActions).Dropped() }

// ControllerAction is a controller action as OVS prints it:
// "controller(userdata=01.02,id=5,pause)", "CONTROLLER:65535".
type ControllerAction struct {
	// Reason is OpenFlow's packet-in reason ("action" unless it says).
	Reason string
	// ID is the controller id the packet-in goes to.
	ID uint16
	// Userdata is what the pipeline put in the packet-in for its agent:
	// the agent's own encoding of what to do with the packet.
	Userdata []byte
	// Pause is true where the pipeline continues after the agent answers.
	Pause bool
}

// Controllers lists the hop's controller actions.
func (h Hop) Controllers() []ControllerAction {
	var out []ControllerAction
	for _, a := range h.Actions {
		if c, ok := ParseController(a); ok {
			out = append(out, c)
		}
	}
	return out
}

// ParseController reads one controller action.
func ParseController(a string) (ControllerAction, bool) {
	c := ControllerAction{Reason: "action"}
	if rest, ok := strings.CutPrefix(a, "CONTROLLER:"); ok {
		_, err := strconv.ParseUint(rest, 10, 16)
		return c, err == nil
	}
	args, ok := strings.CutPrefix(a, "controller(")
	if !ok || !strings.HasSuffix(args, ")") {
		return c, a == "controller"
	}
	for _, kv := range strings.Split(strings.TrimSuffix(args, ")"), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "reason":
			c.Reason = v
		case "id":
			if n, err := strconv.ParseUint(v, 10, 16); err == nil {
				c.ID = uint16(n)
			}
		case "userdata":
			if b, err := hex.DecodeString(strings.ReplaceAll(v, ".", "")); err == nil {
				c.Userdata = b
			}
		case "pause":
			c.Pause = true
		}
	}
	return c, true
}
