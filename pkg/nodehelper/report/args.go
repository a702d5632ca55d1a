package report

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Subcommand is a one-shot traceflow-helper invocation's first argument,
// which serve's commands start too.
type Subcommand string

// The subcommands that run one trace on a node.
const (
	// SubcommandTrace injects the probe at the source port and reports
	// this node's path: the sender.
	SubcommandTrace Subcommand = "trace"
	// SubcommandReceive waits for the probe arriving from a tunnel and
	// reports this node's path: a receiver.
	SubcommandReceive Subcommand = "receive"
)

// HelperArgs is the command line of one trace or receive: what the plugin
// writes into a helper pod's args or a serve command, and what the helper
// reads back with Parse. Both sides use this one value so that a flag can
// only be renamed, added or given a new default in one place.
//
// The fields hold the flags' raw values: the helper checks their ranges
// and combinations (a valid tag, one protocol), so that its errors stay
// the ones a user sees at its command line. OVSRunDir, Bridge and Timeout
// hold what the helper uses, defaults included (Parse fills them in); every
// other field's zero value is its flag's absence.
type HelperArgs struct {
	Subcommand Subcommand
	OVSRunDir  string
	Bridge     string
	// Node is the node to report; "" is the helper's own ($NODE_NAME,
	// else the host name), which only the helper knows.
	Node    string
	Timeout time.Duration
	// Tag is the probe's tag (dscp.Tag); 0 lets a sender draw one (a receiver
	// needs it).
	Tag uint
	// Mark is the probe's mark; 0 derives it from the tag.
	Mark uint
	// ReplyTag follows the answer too, with this tag; 0 does not.
	ReplyTag    uint
	AntreaAgent string
	// AntreaToken is the file of the Antrea agent's token; "" is the one
	// the agent writes for its own antctl.
	AntreaToken string
	// StartOnStdin is --start-on-stdin, or the sender's older
	// --inject-on-stdin, which Args never writes.
	StartOnStdin bool
	// Brief leaves OVS's trace text and the hop list out of the result's
	// explanation (--brief): the observation lines carry every hop, and a
	// plugin reads nothing else of it but the summary.
	Brief bool
	// Probe is a sender's packet and where to inject it; a receive has no
	// such flags, and Args writes none of it.
	Probe ProbeArgs
}

// ProbeArgs are a sender's flags: where to inject the probe, and the
// packet. The zero value gives none of them; TCPFlags and TTL are pointers
// because 0 is a value of their own (no flags; a TTL the helper refuses),
// not their default.
type ProbeArgs struct {
	SourcePod string
	InPort    string
	// SourceNode injects as the node itself (--source-node).
	SourceNode bool
	// SourceOutside injects as a packet from SourceIP, outside the
	// cluster, arriving on the node's uplink (--source-outside).
	SourceOutside bool
	// ReplyTranslated: a round trip's answer from an outside destination
	// may come back to the address and port the pipeline translated the
	// probe's source to (--reply-translated).
	ReplyTranslated bool
	SourceIP        string
	SourceMAC       string
	Destination     string
	DestinationMAC  string
	// TCP and UDP are the destination port; 0 leaves --tcp or --udp out.
	TCP, UDP   uint
	ICMP       bool
	SourcePort uint
	// TCPFlags is the TCP flags byte; nil is the helper's SYN (2).
	TCPFlags *uint
	// TTL is the IP TTL or hop limit; nil is the helper's 64.
	TTL *uint
}

// Defaults of the flags whose zero value is not their default.
const (
	defaultOVSRunDir = "/var/run/openvswitch"
	defaultBridge    = "br-int"
	defaultTimeout   = 10 * time.Second
	// DefaultTCPFlags is a probe's TCP flags where ProbeArgs.TCPFlags is
	// nil: SYN, a connection's first packet.
	DefaultTCPFlags = 2
	// DefaultTTL is a probe's TTL or hop limit where ProbeArgs.TTL is nil.
	DefaultTTL = 64
)

// Args is a's command line: the subcommand, then --ovs-rundir, --bridge,
// --tag and --timeout always (they say where the helper looks, in the
// pod's spec too), then every other flag that a gives, in the order the
// plugin has always written them.
func (a HelperArgs) Args() []string {
	args := []string{string(a.Subcommand), "--ovs-rundir", a.OVSRunDir, "--bridge", a.Bridge}
	args = appendString(args, "--node", a.Node)
	args = append(args, "--tag", uintString(a.Tag), "--timeout", a.Timeout.String())
	args = appendString(args, "--antrea-agent", a.AntreaAgent)
	args = appendString(args, "--antrea-token", a.AntreaToken)
	args = appendUint(args, "--mark", a.Mark)
	args = appendUint(args, "--reply-tag", a.ReplyTag)
	if a.StartOnStdin {
		args = append(args, "--start-on-stdin")
	}
	if a.Brief {
		args = append(args, "--brief")
	}
	if a.Subcommand != SubcommandTrace {
		return args
	}
	p := a.Probe
	args = appendString(args, "--source-pod", p.SourcePod)
	args = appendString(args, "--in-port", p.InPort)
	if p.SourceNode {
		args = append(args, "--source-node")
	}
	if p.SourceOutside {
		args = append(args, "--source-outside")
	}
	if p.ReplyTranslated {
		args = append(args, "--reply-translated")
	}
	args = appendString(args, "--source-ip", p.SourceIP)
	args = appendString(args, "--source-mac", p.SourceMAC)
	args = appendString(args, "--destination", p.Destination)
	args = appendString(args, "--destination-mac", p.DestinationMAC)
	args = appendUint(args, "--tcp", p.TCP)
	args = appendUint(args, "--udp", p.UDP)
	if p.ICMP {
		args = append(args, "--icmp")
	}
	args = appendUint(args, "--source-port", p.SourcePort)
	if p.TCPFlags != nil {
		args = append(args, "--tcp-flags", uintString(*p.TCPFlags))
	}
	if p.TTL != nil {
		args = append(args, "--ttl", uintString(*p.TTL))
	}
	return args
}

func appendString(args []string, name, v string) []string {
	if v == "" {
		return args
	}
	return append(args, name, v)
}

func appendUint(args []string, name string, v uint) []string {
	if v == 0 {
		return args
	}
	return append(args, name, uintString(v))
}

func uintString(v uint) string { return strconv.FormatUint(uint64(v), 10) }

// FlagError is a command line that the flag set itself refused: a flag it
// does not know, a value that does not parse, or -h (flag.ErrHelp). Parse
// writes nothing; the helper answers a FlagError with its flags' usage, as
// a flag.FlagSet would.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }

// Unwrap lets errors.Is find flag.ErrHelp.
func (e *FlagError) Unwrap() error { return e.Err }

// Parse reads a trace or receive command line, args[0] being the
// subcommand. It checks only what a HelperArgs cannot hold (an unknown
// subcommand or flag, a value of the wrong type, an argument that is no
// flag); the helper checks the values.
func Parse(args []string) (HelperArgs, error) {
	if len(args) == 0 || (args[0] != string(SubcommandTrace) && args[0] != string(SubcommandReceive)) {
		return HelperArgs{}, errors.New("want a trace or receive command line")
	}
	var a HelperArgs
	fs, given := flagSet(Subcommand(args[0]), &a)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args[1:]); err != nil {
		return HelperArgs{}, &FlagError{Err: err}
	}
	if fs.NArg() > 0 {
		return HelperArgs{}, fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	given()
	return a, nil
}

// FlagSet is sub's flags as Parse reads them, for the helper's usage text:
// it writes to stderr and is bound to nothing that Parse returns.
func FlagSet(sub Subcommand) *flag.FlagSet {
	var a HelperArgs
	fs, _ := flagSet(sub, &a)
	return fs
}
