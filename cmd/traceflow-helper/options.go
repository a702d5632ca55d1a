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
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/engine"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

var errHelp = errors.New("help requested")

// options holds one subcommand's raw flag values.
type options struct {
	mode    string
	fs      *flag.FlagSet
	rundir  string
	bridge  string
	node    string
	tag     uint
	mark    uint
	timeout time.Duration

	sourcePod, inPort                  string
	sourceIP, sourceMAC, dest, destMAC string
	tcp, udp, srcPort                  uint
	icmp                               bool
	injectOnStdin                      bool // --start-on-stdin, or --inject-on-stdin
	tcpFlags, ttl                      uint
	antreaAgent, antreaToken           string

	// spec is the sender's trace, checked by parseTrace; its Common is
	// filled in when the trace runs.
	spec engine.TraceSpec
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

func newOptions(mode string, stderr io.Writer) *options {
	o := &options{mode: mode, fs: flag.NewFlagSet(mode, flag.ContinueOnError)}
	fs := o.fs
	fs.SetOutput(stderr)
	fs.StringVar(&o.rundir, "ovs-rundir", "/var/run/openvswitch", "OVS run directory: db.sock, BRIDGE.mgmt and ovs-vswitchd.PID.ctl")
	fs.StringVar(&o.bridge, "bridge", "br-int", "the OVS bridge that carries pod traffic")
	fs.StringVar(&o.node, "node", nodeName(), "node name to report ($NODE_NAME, else the hostname)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "how long to wait for the probe; also the flows' hard_timeout")
	fs.UintVar(&o.mark, "mark", 0, "the probe's mark in its IPv4 identification (low 16 bits) or IPv6 flow label, 1..0xfffff; sender and receivers of one trace must agree (default: derived from the tag; the plugin passes a random one)")
	fs.StringVar(&o.antreaAgent, "antrea-agent", "", "HOST:PORT of the node's Antrea agent API (127.0.0.1:10350): name the policy and rule behind a conjunction id by asking it (needs --antrea-token readable)")
	fs.StringVar(&o.antreaToken, "antrea-token", antreaagent.TokenFile, "the token Antrea's agent writes for its own antctl, used with --antrea-agent")
	fs.BoolVar(&o.injectOnStdin, "start-on-stdin", false, "start, then wait for a line on standard input before installing flows (the plugin's word: at once for a receiver, once every receiver is ready for a sender); the plugin then reads the report through the same attach, without the kubelet's log lag")
	if mode == "receive" {
		fs.UintVar(&o.tag, "tag", 0, "the probe's DSCP tag, 1..63 (required)")
		return o
	}
	fs.UintVar(&o.tag, "tag", 0, "the probe's DSCP tag, 1..63 (default: random, from the helper's pool, none of Antrea's tags nor a code point real traffic uses)")
	fs.StringVar(&o.sourcePod, "source-pod", "", "inject at this pod's port: NAMESPACE/NAME (Antrea pod-namespace/pod-name or OVN-Kubernetes iface-id)")
	fs.StringVar(&o.inPort, "in-port", "", "inject at this OVS port (instead of --source-pod)")
	fs.StringVar(&o.dest, "destination", "", "destination IP (IPv4 or IPv6, required)")
	fs.UintVar(&o.tcp, "tcp", 0, "probe TCP to this destination port (default: TCP 80 unless --udp or --icmp)")
	fs.UintVar(&o.udp, "udp", 0, "probe UDP to this destination port")
	fs.BoolVar(&o.icmp, "icmp", false, "probe with an ICMP (ICMPv6) echo request")
	fs.UintVar(&o.srcPort, "source-port", 0, "TCP/UDP source port (default 32768+tag)")
	fs.UintVar(&o.tcpFlags, "tcp-flags", 2, "TCP flags byte (2 = SYN)")
	fs.UintVar(&o.ttl, "ttl", 64, "IP TTL / hop limit")
	fs.StringVar(&o.sourceIP, "source-ip", "", "probe source IP (default: the port's external_ids ip, ip_addresses or ip-address)")
	fs.StringVar(&o.sourceMAC, "source-mac", "", "probe source MAC (default: the port's external_ids mac, attached_mac or attached-mac)")
	fs.BoolVar(&o.injectOnStdin, "inject-on-stdin", false, "the same as --start-on-stdin (the name earlier plugins pass a sender)")
	fs.StringVar(&o.destMAC, "destination-mac", "", "probe destination MAC (default: the local destination pod's MAC, else the gateway port's)")
	return o
}

func (o *options) parse(args []string) error {
	if err := o.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	if o.fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", o.fs.Args())
	}
	if o.timeout <= 0 || o.timeout > 300*time.Second {
		return fmt.Errorf("--timeout %s out of range (0, 300s]", o.timeout)
	}
	if o.mode == "receive" && o.tag == 0 {
		return errors.New("--tag is required: the tag the sender's probe carries")
	}
	if o.mode == "trace" && o.tag == 0 {
		o.tag = uint(randomTag())
	}
	if o.tag > 63 {
		return fmt.Errorf("--tag %d out of range 1..63 (a DSCP value)", o.tag)
	}
	if o.antreaAgent != "" {
		if _, _, err := net.SplitHostPort(o.antreaAgent); err != nil {
			return fmt.Errorf("--antrea-agent %q: want HOST:PORT: %w", o.antreaAgent, err)
		}
	}
	if o.mark > probe.MaxMark {
		return fmt.Errorf("--mark %#x out of range 1..%#x (an IPv6 flow label)", o.mark, probe.MaxMark)
	}
	return nil
}

// randomTag is a tag from the helper's pool (dscp.Pool): never one an Antrea
// trace may carry at the same time, nor a code point real traffic uses.
func randomTag() uint8 {
	p := dscp.Pool()
	var b [1]byte
	_, _ = rand.Read(b[:])
	return p[int(b[0])%len(p)]
}

func (o *options) common(out *report.Writer, logf func(string, ...any)) engine.Common {
	var rules engine.RuleNamer
	if o.antreaAgent != "" {
		rules = &antreaagent.Client{Addr: o.antreaAgent, TokenFile: o.antreaToken}
	}
	return engine.Common{
		Rules:  rules,
		Rundir: o.rundir, Bridge: o.bridge, Node: o.node, Tag: uint8(o.tag), Mark: uint32(o.mark), Timeout: o.timeout, //nolint:gosec // checked <= 63 and <= MaxMark
		Out: out, Logf: logf,
		Random: func() uint32 {
			var b [4]byte
			_, _ = rand.Read(b[:])
			return binary.BigEndian.Uint32(b[:])
		},
	}
}

func (o *options) traceSpec() (engine.TraceSpec, error) {
	s := engine.TraceSpec{SourcePod: o.sourcePod, InPort: o.inPort}
	if (o.sourcePod == "") == (o.inPort == "") {
		return s, errors.New("give exactly one of --source-pod NAMESPACE/NAME and --in-port OVS_PORT")
	}
	var err error
	if s.Destination, err = netip.ParseAddr(o.dest); err != nil {
		return s, fmt.Errorf("--destination %q: want an IP address", o.dest)
	}
	n := 0
	for _, set := range []bool{o.tcp != 0, o.udp != 0, o.icmp} {
		if set {
			n++
		}
	}
	if n > 1 {
		return s, errors.New("give at most one of --tcp, --udp and --icmp")
	}
	switch {
	case o.udp != 0:
		s.Protocol, s.DstPort = probe.UDP, uint16(o.udp) //nolint:gosec // checked below
	case o.icmp:
		s.Protocol = probe.ICMP
	default:
		s.Protocol, s.DstPort = probe.TCP, 80
		if o.tcp != 0 {
			s.DstPort = uint16(o.tcp) //nolint:gosec // checked below
		}
	}
	if o.tcp > 65535 || o.udp > 65535 || o.srcPort > 65535 || o.tcpFlags > 255 || o.ttl > 255 || o.ttl == 0 {
		return s, errors.New("a port is above 65535, --tcp-flags above 255 or --ttl not in 1..255")
	}
	s.SrcPort, s.TCPFlags, s.TTL = uint16(o.srcPort), uint8(o.tcpFlags), uint8(o.ttl) //nolint:gosec // checked above
	if o.sourceIP != "" {
		if s.SourceIP, err = netip.ParseAddr(o.sourceIP); err != nil {
			return s, fmt.Errorf("--source-ip %q: want an IP address", o.sourceIP)
		}
	}
	if o.sourceMAC != "" {
		if s.SourceMAC, err = net.ParseMAC(o.sourceMAC); err != nil {
			return s, fmt.Errorf("--source-mac: %w", err)
		}
	}
	if o.destMAC != "" {
		if s.DestinationMAC, err = net.ParseMAC(o.destMAC); err != nil {
			return s, fmt.Errorf("--destination-mac: %w", err)
		}
	}
	return s, nil
}
