package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/version"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helpermode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Output formats. An unset -o means live on a terminal and plain
// otherwise.
const (
	outputPlain = "plain"
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputLive  = "live"
	// outputWide is plain (or live, on a terminal) with each hop's OVS
	// table and flow.
	outputWide = "wide"
)

// DefaultHelperImage is the helper image this plugin version runs: the
// digest a release stamped into the binary, or else the image whose tag is
// the plugin's version, so the two always match.
func DefaultHelperImage() string {
	if version.HelperImage != "" {
		return version.HelperImage
	}
	return "ghcr.io/kubectl-traceflow/traceflow-helper:" + version.Version
}

// TraceOptions is `kubectl traceflow SRC DST`: raw flag values, then the
// typed inputs Complete derives from them.
type TraceOptions struct {
	genericiooptions.IOStreams
	configFlags *genericclioptions.ConfigFlags
	deps        Deps
	// pool and abandon are a check run's: its shared helpers, and the
	// cleanup of all its running traces (nil for a single trace).
	pool    *helpermode.Pool
	abandon *abandoner

	// Flag values, as typed.
	tcpPort, udpPort int32
	icmp             bool
	srcPort          int32
	tcpFlags         int32
	ttl              int32
	ipv6             bool
	live             bool
	droppedOnly      bool
	timeout          time.Duration
	engine           string
	output           string
	expect           string
	color            string
	dryRun           bool
	keep             bool
	allEndpoints     bool
	explain          bool
	helperImage      string
	helperNamespace  string
	ovsRunDir        string
	ovnRunDir        string
	bridge           string
	antreaNames      bool
	changed          func(name string) bool

	// Typed inputs, set by Complete.
	source, destination resolve.Ref
	protocol            traceflow.Protocol
	dstPort             int32
	format              string
	useColor            bool
}

func newTraceCommand(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &TraceOptions{IOStreams: streams, configFlags: cf, deps: deps,
		ttl: traceflow.DefaultTTL, timeout: traceflow.DefaultTimeoutSeconds * time.Second,
		tcpFlags: traceflow.TCPFlagSYN, engine: "auto", expect: "delivered", color: "auto",
		helperImage: DefaultHelperImage(), helperNamespace: install.DefaultNamespace,
		ovsRunDir: helperpod.DefaultOVSRunDir, ovnRunDir: helperpod.OVNRunDir, bridge: helperpod.DefaultBridge, antreaNames: true}
	cmd := &cobra.Command{
		Use:         "traceflow SRC DST [--tcp PORT | --udp PORT | --icmp]",
		Short:       "Trace a packet from a pod to a pod, Service or IP through the Open vSwitch dataplane",
		Long:        traceLong,
		Example:     traceExamples,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: DisplayName},
		Args:        exactArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.changed = func(name string) bool { return cmd.Flags().Changed(name) }
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func (o *TraceOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Var(&portValue{&o.tcpPort, "--tcp 80"}, "tcp", "trace a TCP packet to destination port PORT")
	f.Var(&portValue{&o.udpPort, "--udp 53"}, "udp", "trace a UDP packet to destination port PORT")
	f.BoolVar(&o.icmp, "icmp", false, "trace an ICMP echo request (the default, except for a Service)")
	f.Var(&portValue{&o.srcPort, "--src-port 40000"}, "src-port", "source port of a TCP or UDP probe (default: chosen by the engine)")
	f.Var(&tcpFlagsValue{&o.tcpFlags}, "tcp-flags", "TCP flags of a --tcp probe: names joined by commas (SYN,ACK), none, or a number 0-255")
	f.Var(&ttlValue{&o.ttl}, "ttl", "IPv4 TTL or IPv6 hop limit of the probe, 1-255")
	f.BoolVar(&o.ipv6, "ipv6", false, "trace over IPv6 (implied by an IPv6 destination)")
	f.BoolVar(&o.live, "live", false, "trace the first packet of real traffic that matches, instead of injecting one")
	f.BoolVar(&o.droppedOnly, "dropped-only", false, "with --live, capture only a packet that is dropped")
	f.Var(&timeoutValue{&o.timeout}, "timeout", "how long the trace may take, 1s to 300s")
	f.Var(&enumValue{&o.engine, []string{"auto", "agent", "helper"}}, "engine",
		"who traces: agent (Antrea's agents), helper (our node helper pods), or auto (agent where Antrea serves Traceflow)")
	f.VarP(&enumValue{&o.output, []string{outputPlain, outputWide, outputJSON, outputYAML}}, "output", "o",
		"output format (default: live on a terminal, plain otherwise); wide shows every hop (on Antrea's pipeline, not only the ones Antrea reports) with its OVS table and flow")
	f.BoolVar(&o.explain, "explain", false, "show every hop with its OVS table and flow (as -o wide does)")
	f.StringVar(&o.helperImage, "helper-image", o.helperImage, "image of the node helper pods (helper engine)")
	f.StringVar(&o.helperNamespace, "helper-namespace", o.helperNamespace,
		"namespace for the helper pods and tag claims; it must allow privileged pods (PodSecurity)")
	f.StringVar(&o.ovsRunDir, "ovs-rundir", o.ovsRunDir, "the nodes' Open vSwitch run directory (db.sock, BRIDGE.mgmt)")
	f.StringVar(&o.ovnRunDir, "ovn-rundir", o.ovnRunDir, "the nodes' OVN run directory, where OVN-Kubernetes keeps the southbound and northbound databases' sockets (hops are named by OVN's logical flows)")
	f.StringVar(&o.bridge, "bridge", o.bridge, "the OVS bridge that carries pod traffic")
	f.BoolVar(&o.antreaNames, "antrea-names", o.antreaNames, "helper engine on Antrea: ask each node's Antrea agent (its API on the node, with its own token) which policy and rule a conjunction id stands for; a verdict at a rule waits for the name, about 0.1 s per rule of the policies asked about")
	f.Var(&enumValue{&o.expect, []string{"delivered", "dropped", "rejected", "any"}}, "expect",
		"the verdict that exits 0; another verdict exits 2")
	f.Var(&enumValue{&o.color, []string{"auto", "always", "never"}}, "color", "colour the output: auto honours NO_COLOR and needs a terminal")
	f.Var(&dryRunValue{&o.dryRun}, "dry-run", "resolve and print the Traceflow that would be created, and create nothing")
	f.Lookup("dry-run").NoOptDefVal = "true"
	f.BoolVar(&o.keep, "keep", false, "keep the Traceflow record after the trace (default: delete it)")
	f.BoolVar(&o.allEndpoints, "all-endpoints", false,
		"to a Service: also trace to each ready endpoint (its IP and target port), each reported as by `check`")
}

// Complete parses SRC and DST and derives the typed inputs. It reads no
// kubeconfig and calls no API.
func (o *TraceOptions) Complete(args []string) error {
	var err error
	if o.source, err = resolve.ParseSource(args[0]); err != nil {
		return err
	}
	if o.destination, err = resolve.ParseDestination(args[1]); err != nil {
		return err
	}
	switch {
	case o.changed("tcp"):
		o.protocol, o.dstPort = traceflow.TCP, o.tcpPort
	case o.changed("udp"):
		o.protocol, o.dstPort = traceflow.UDP, o.udpPort
	case o.changed("icmp") && o.icmp:
		o.protocol = traceflow.ICMP
	}
	if o.destination.Kind == resolve.KindIP && o.destination.IP.Is6() && !o.changed("ipv6") {
		o.ipv6 = true // an IPv6 destination says it all
	}
	o.format = o.output
	terminal := o.deps.IsTerminal(o.Out)
	if o.format == outputWide {
		o.format, o.explain = "", true
	}
	if o.format == "" {
		o.format = outputPlain
		if terminal {
			o.format = outputLive
		}
	}
	o.useColor = colorEnabled(o.color, terminal, o.deps.Getenv)
	return nil
}

// Validate checks the flags against each other and against SRC and DST,
// still without a cluster.
func (o *TraceOptions) Validate() error {
	var protocols []string
	for _, p := range []string{"tcp", "udp", "icmp"} {
		if o.changed(p) {
			protocols = append(protocols, "--"+p)
		}
	}
	if len(protocols) > 1 {
		return exitcode.UsageErrorf("%s choose different protocols: give only one of --tcp PORT, --udp PORT and --icmp", strings.Join(protocols, " and "))
	}
	if o.changed("icmp") && !o.icmp && len(protocols) == 1 {
		return exitcode.UsageErrorf("--icmp=false chooses no protocol: give --tcp PORT or --udp PORT, or leave --icmp out")
	}
	// A Service without --tcp or --udp gets the protocol of its first port,
	// known only after resolution; Run checks these two flags again then.
	protocolPending := o.protocol == "" && o.destination.Kind == resolve.KindService
	if o.changed("src-port") && !protocolPending && o.protocol != traceflow.TCP && o.protocol != traceflow.UDP {
		return exitcode.UsageErrorf("--src-port needs a TCP or UDP probe: add --tcp PORT or --udp PORT, or drop --src-port")
	}
	if o.changed("tcp-flags") && !protocolPending && o.protocol != traceflow.TCP {
		return exitcode.UsageErrorf("--tcp-flags needs a TCP probe: add --tcp PORT, or drop --tcp-flags")
	}
	if err := helperpod.ValidateImage(o.helperImage); err != nil {
		return exitcode.UsageErrorf("--helper-image: %v", err)
	}
	if err := helperpod.ValidateRunDir(o.ovsRunDir); err != nil {
		return exitcode.UsageErrorf("--ovs-rundir: %v", err)
	}
	if o.droppedOnly && !o.live {
		return exitcode.UsageErrorf("--dropped-only applies to live traffic only: add --live, or drop --dropped-only")
	}
	dst := o.destination
	if dst.Kind == resolve.KindIP && dst.IP.Is4() && o.ipv6 {
		return exitcode.UsageErrorf("DST %s is an IPv4 address but --ipv6 asks for IPv6: drop --ipv6, or give an IPv6 destination", dst.IP)
	}
	if dst.Kind == resolve.KindIP && dst.IP.Is6() && !o.ipv6 {
		return exitcode.UsageErrorf("DST %s is an IPv6 address but --ipv6=false asks for IPv4: drop --ipv6=false, or give an IPv4 destination", dst.IP)
	}
	if dst.Kind == resolve.KindService && o.protocol == traceflow.ICMP {
		return exitcode.UsageErrorf("Service %s load-balances ports, not ICMP: drop --icmp to use its first port, give --tcp PORT or --udp PORT, or trace to one of its pods", dst.Name)
	}
	if o.allEndpoints {
		if err := o.validateAllEndpoints(); err != nil {
			return err
		}
	}
	if resolve.SameObject(o.source, dst) {
		return exitcode.UsageErrorf("SRC and DST are the same pod %q: trace to another pod, a Service or an IP", dst.Name)
	}
	return nil
}

// Run resolves the endpoints in the cluster, builds the Traceflow, and
// either prints it (--dry-run) or runs the trace with the chosen engine.
func (o *TraceOptions) Run(ctx context.Context) error {
	if o.allEndpoints {
		return o.runAllEndpoints(ctx)
	}
	clients, err := o.deps.Connect(o.configFlags)
	if err != nil {
		return err
	}
	res, err := resolve.Resolve(ctx, clients.Lookup, resolve.Query{
		Source: o.source, Destination: o.destination, Namespace: clients.Namespace,
		IPv6: o.ipv6, Protocol: o.protocol, DstPort: o.dstPort, Live: o.live,
	})
	if err != nil {
		return err
	}
	if o.changed("tcp-flags") && res.Protocol != traceflow.TCP {
		return exitcode.UsageErrorf("--tcp-flags needs a TCP probe, but Service %s/%s's first port is %s %d: give --tcp PORT with one of its TCP ports, or drop --tcp-flags",
			res.Destination.Namespace, res.Destination.Name, res.Protocol, res.DstPort)
	}
	for _, w := range res.Warnings {
		// A warning that cannot be written must not stop the trace.
		_, _ = fmt.Fprintf(o.ErrOut, "Warning: %s\n", w)
	}
	tf := traceflow.Build(o.request(res))
	if o.dryRun {
		return o.print(o.Out, tf, res)
	}
	s := newSink(o.format, o.explain, o.useColor, o.Out, time.Now)
	if o.format == outputJSON || o.format == outputYAML {
		s.warnTo = o.ErrOut
	}
	r, err := o.trace(ctx, clients, res, tf, s.Emit)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return o.finish(s, tf, r, err)
}

// finish prints what the chosen format prints at the end, the one-line
// summary, and turns the verdict into the exit code.
func (o *TraceOptions) finish(s *sink, tf *traceflow.Traceflow, r traceResult, err error) error {
	if r.verdict == "" { // the trace never started
		return err
	}
	summaryTo := o.Out
	switch o.format {
	case outputJSON, outputYAML:
		summaryTo = o.ErrOut
		if perr := o.print(o.Out, s.record(tf), nil); perr != nil && err == nil {
			err = perr
		}
	}
	expect := outcome.Expect(o.expect)
	_, _ = fmt.Fprintln(summaryTo, s.summary(expect)) // the exit code carries the verdict if this write fails
	if err != nil {
		return err
	}
	code, verr := outcome.ExitCode(r.verdict, expect, r.dst)
	if verr != nil && r.reason != "" {
		reason := r.reason
		if r.decided != nil && r.decided.Inferred() {
			reason += " (predicted by OVS's trace, not observed)"
		}
		verr = fmt.Errorf("%w: %s", verr, reason)
	}
	return exitcode.Wrap(code, verr)
}

// request turns a resolution into the builder's input.
func (o *TraceOptions) request(res *resolve.Result) traceflow.Request {
	r := traceflow.Request{
		Source:   traceflow.Source{Namespace: res.Source.Namespace, Pod: res.Source.Name},
		Protocol: res.Protocol, IPv6: o.ipv6, DstPort: res.DstPort, SrcPort: o.srcPort,
		TCPFlags: o.tcpFlags, TTL: o.ttl, Live: o.live, DroppedOnly: o.droppedOnly, Timeout: o.timeout,
	}
	dst := res.Destination
	dstName := dst.Name
	switch dst.Kind {
	case resolve.KindPod:
		r.Destination = traceflow.Destination{Namespace: dst.Namespace, Pod: dst.Name}
	case resolve.KindService:
		r.Destination = traceflow.Destination{Namespace: dst.Namespace, Service: dst.Name}
	case resolve.KindIP:
		r.Destination = traceflow.Destination{IP: dst.IP.String()}
		dstName = dst.IP.String()
	}
	r.Name = traceflow.Name(res.Source.Name, dstName, o.deps.Suffix())
	return r
}

// print writes the dry-run result in the chosen format.
func (o *TraceOptions) print(w io.Writer, tf *traceflow.Traceflow, res *resolve.Result) error {
	switch o.format {
	case outputJSON:
		return printJSON(w, tf)
	case outputYAML:
		return printYAML(w, tf)
	}
	return printPlain(w, tf, res)
}
