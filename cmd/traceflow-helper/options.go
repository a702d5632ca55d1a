package main

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/antreaagent"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/tracer"
)

var errHelp = errors.New("help requested")

// options is one subcommand's invocation: its flags as given
// (report.HelperArgs, the contract the plugin writes to), and what the
// helper makes of them.
type options struct {
	mode    string
	flagOut io.Writer
	args    report.HelperArgs
	// tag is --tag, or for a trace without one a tag drawn from the pool.
	tag uint

	// spec is the sender's trace, checked by parseTrace; its Common is
	// filled in when the trace runs.
	spec tracer.TraceSpec
	// cache is serve's, shared by its traces; nil for a one-shot helper.
	cache *tracer.NodeCache
}

// parseTrace parses a trace or receive invocation (args[0] is the mode)
// and checks everything that can be checked without OVS, so that a bad
// invocation fails before it starts. Flag help and flag errors go to
// flagOut.
func parseTrace(args []string, flagOut io.Writer) (*options, error) {
	o := newOptions(args[0], flagOut)
	if err := o.parse(args[1:]); err != nil {
		return nil, err
	}
	if o.mode == "trace" {
		var err error
		if o.spec, err = o.traceSpec(); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// nodeName is the node to report: $NODE_NAME (the pod's spec.nodeName,
// from the downward API), else the hostname.
func nodeName() string {
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	host, _ := os.Hostname()
	return host
}

func newOptions(mode string, flagOut io.Writer) *options {
	return &options{mode: mode, flagOut: flagOut}
}

// parse reads the flags after the mode with report.Parse and checks their
// values.
func (o *options) parse(args []string) error {
	a, err := report.Parse(append([]string{o.mode}, args...))
	if err != nil {
		var fe *report.FlagError
		if errors.As(err, &fe) {
			o.printFlagError(fe)
		}
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	o.args, o.tag = a, a.Tag
	if a.Timeout <= 0 || a.Timeout > 300*time.Second {
		return fmt.Errorf("--timeout %s out of range (0, 300s]", a.Timeout)
	}
	if o.mode == "receive" && o.tag == 0 {
		return errors.New("--tag is required: the tag the sender's probe carries")
	}
	if o.mode == "trace" && o.tag == 0 {
		o.tag = uint(randomTag())
	}
	if o.tag > 255 || !dscp.ValidTag(uint8(o.tag)) {
		return fmt.Errorf("--tag %d out of range %s", o.tag, dscp.TagRange)
	}
	if a.ReplyTag != 0 && (a.ReplyTag > 255 || !dscp.ValidTag(uint8(a.ReplyTag)) || a.ReplyTag == o.tag) {
		return fmt.Errorf("--reply-tag %d: want a tag %s, other than the probe's tag %d", a.ReplyTag, dscp.TagRange, o.tag)
	}
	if a.AntreaAgent != "" {
		if _, _, err := net.SplitHostPort(a.AntreaAgent); err != nil {
			return fmt.Errorf("--antrea-agent %q: want HOST:PORT: %w", a.AntreaAgent, err)
		}
	}
	if a.Mark > probe.MaxMark {
		return fmt.Errorf("--mark %#x out of range 1..%#x (an IPv6 flow label)", a.Mark, probe.MaxMark)
	}
	return nil
}

// printFlagError writes to flagOut what a flag.FlagSet writes of a command
// line it refuses: the error (none for -h), then the usage, with the
// defaults of --node and --antrea-token that only this node knows.
func (o *options) printFlagError(fe *report.FlagError) {
	if !errors.Is(fe, flag.ErrHelp) {
		_, _ = fmt.Fprintln(o.flagOut, fe)
	}
	fs := report.FlagSet(report.Subcommand(o.mode))
	fs.SetOutput(o.flagOut)
	fs.Lookup("node").DefValue = nodeName()
	fs.Lookup("antrea-token").DefValue = antreaagent.TokenFile
	_, _ = fmt.Fprintf(o.flagOut, "Usage of %s:\n", o.mode)
	fs.PrintDefaults()
}

// randomTag is a tag from the helper's pool (dscp.Pool): never one an Antrea
// trace may carry at the same time, nor a code point real traffic uses.
func randomTag() uint8 {
	p := dscp.Pool()
	var b [1]byte
	_, _ = rand.Read(b[:])
	return p[int(b[0])%len(p)]
}

func (o *options) common(out *report.Writer, logf func(string, ...any)) tracer.Common {
	a := o.args
	var rules tracer.RuleNamer
	if a.AntreaAgent != "" {
		rules = &antreaagent.Client{Addr: a.AntreaAgent, TokenFile: a.AntreaToken}
	}
	node := a.Node
	if node == "" {
		node = nodeName()
	}
	return tracer.Common{
		Rules:  rules,
		Rundir: a.OVSRunDir, Bridge: a.Bridge, Node: node, Tag: uint8(o.tag), ReplyTag: uint8(a.ReplyTag), Mark: uint32(a.Mark), Timeout: a.Timeout, //nolint:gosec // checked valid tags (< 256) and <= MaxMark
		Out: out, Logf: logf, Brief: a.Brief, Cache: o.cache,
		Random: func() uint32 {
			var b [4]byte
			_, _ = rand.Read(b[:])
			return binary.BigEndian.Uint32(b[:])
		},
	}
}

func (o *options) traceSpec() (tracer.TraceSpec, error) {
	p := o.args.Probe
	s := tracer.TraceSpec{SourcePod: p.SourcePod, InPort: p.InPort, SourceNode: p.SourceNode, SourceOutside: p.SourceOutside, ReplyTranslated: p.ReplyTranslated}
	if n := countSet(p.SourcePod != "", p.InPort != "", p.SourceNode, p.SourceOutside); n != 1 {
		return s, errors.New("give exactly one of --source-pod NAMESPACE/NAME, --in-port OVS_PORT, --source-node and --source-outside")
	}
	var err error
	if s.Destination, err = netip.ParseAddr(p.Destination); err != nil {
		return s, fmt.Errorf("--destination %q: want an IP address", p.Destination)
	}
	if countSet(p.TCP != 0, p.UDP != 0, p.ICMP) > 1 {
		return s, errors.New("give at most one of --tcp, --udp and --icmp")
	}
	switch {
	case p.UDP != 0:
		s.Protocol, s.DstPort = probe.UDP, uint16(p.UDP) //nolint:gosec // checked below
	case p.ICMP:
		s.Protocol = probe.ICMP
	default:
		s.Protocol, s.DstPort = probe.TCP, 80
		if p.TCP != 0 {
			s.DstPort = uint16(p.TCP) //nolint:gosec // checked below
		}
	}
	tcpFlags, ttl := uint(report.DefaultTCPFlags), uint(report.DefaultTTL)
	if p.TCPFlags != nil {
		tcpFlags = *p.TCPFlags
	}
	if p.TTL != nil {
		ttl = *p.TTL
	}
	if p.TCP > 65535 || p.UDP > 65535 || p.SourcePort > 65535 || tcpFlags > 255 || ttl > 255 || ttl == 0 {
		return s, errors.New("a port is above 65535, --tcp-flags above 255 or --ttl not in 1..255")
	}
	s.SrcPort, s.TCPFlags, s.TTL = uint16(p.SourcePort), uint8(tcpFlags), uint8(ttl) //nolint:gosec // checked above
	if p.SourceIP != "" {
		if s.SourceIP, err = netip.ParseAddr(p.SourceIP); err != nil {
			return s, fmt.Errorf("--source-ip %q: want an IP address", p.SourceIP)
		}
	}
	if p.SourceMAC != "" {
		if s.SourceMAC, err = net.ParseMAC(p.SourceMAC); err != nil {
			return s, fmt.Errorf("--source-mac: %w", err)
		}
	}
	if p.DestinationMAC != "" {
		if s.DestinationMAC, err = net.ParseMAC(p.DestinationMAC); err != nil {
			return s, fmt.Errorf("--destination-mac: %w", err)
		}
	}
	return s, nil
}

// countSet is how many of the flags' conditions hold.
func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}
