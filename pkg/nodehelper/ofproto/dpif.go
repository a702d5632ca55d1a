package ofproto

import (
	"context"
	"regexp"
	"strconv"
	"strings"
)

// DatapathPort is a port as `ovs-appctl dpif/show` lists it: the datapath
// actions of a trace name datapath port numbers, OpenFlow names OpenFlow
// port numbers, and only dpif/show says which is which.
type DatapathPort struct {
	// Datapath is the datapath holding the port ("netdev@ovs-netdev").
	Datapath string
	// Bridge and Name are the bridge and the port's name.
	Bridge string
	Name   string
	// OFPort is the OpenFlow port number (65534 for the bridge's own
	// internal port, OpenFlow's LOCAL).
	OFPort int
	// DPPort is the datapath port number.
	DPPort uint32
	// Type is what dpif/show says in parentheses ("system", "tap",
	// "geneve: key=flow, remote_ip=flow").
	Type string
}

// DatapathPorts are the ports of every datapath of one ovs-vswitchd.
type DatapathPorts []DatapathPort

// "    pod1 1/4: (system)", "    patch-br-ex 2/none: (patch: peer=...)"
var dpifPortRE = regexp.MustCompile(`^\s+(\S+) (\d+)/(\S+):(?: \((.*)\))?\s*$`)

// ParseDpifShow reads the text of dpif/show. Ports without a datapath
// number (patch ports, which exist only in OpenFlow) are left out.
func ParseDpifShow(text string) DatapathPorts {
	var out DatapathPorts
	dp, br := "", ""
	for _, line := range strings.Split(text, "\n") {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
		case indent == 0:
			dp, _, _ = strings.Cut(trimmed, ":")
			br = ""
		case indent <= 2 && strings.HasSuffix(trimmed, ":"):
			br = strings.TrimSuffix(trimmed, ":")
		default:
			m := dpifPortRE.FindStringSubmatch(line)
			if m == nil || br == "" {
				continue
			}
			of, err1 := strconv.Atoi(m[2])
			n, err2 := strconv.ParseUint(m[3], 10, 32)
			if err1 != nil || err2 != nil {
				continue
			}
			out = append(out, DatapathPort{Datapath: dp, Bridge: br, Name: m[1], OFPort: of, DPPort: uint32(n), Type: m[4]})
		}
	}
	return out
}

// Lookup finds datapath port n in the datapath that holds bridge: port
// numbers are per datapath, and one ovs-vswitchd may run two (system and
// netdev).
func (d DatapathPorts) Lookup(bridge string, n uint32) (DatapathPort, bool) {
	dp := ""
	for _, p := range d {
		if p.Bridge == bridge {
			dp = p.Datapath
			break
		}
	}
	for _, p := range d {
		if p.DPPort == n && (dp == "" || p.Datapath == dp) {
			return p, true
		}
	}
	return DatapathPort{}, false
}

// DatapathPorts asks ovs-vswitchd for its datapath ports (dpif/show).
func (c Client) DatapathPorts(ctx context.Context) (DatapathPorts, error) {
	text, err := c.Call(ctx, "dpif/show")
	if err != nil {
		return nil, err
	}
	return ParseDpifShow(text), nil
}
