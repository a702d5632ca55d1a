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

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tracerun"
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

// TraceOptions is `kubectl traceflow SRC DST`: raw flag values, then the
// typed inputs Complete derives from them.
type TraceOptions struct {
	genericiooptions.IOStreams
	configFlags *genericclioptions.ConfigFlags
	deps        Deps

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
	roundTrip        bool
	// via is the node whose uplink receives a probe from outside (SRC an
	// IP address), from --via node/NAME.
	via     string
	changed func(name string) bool

	// Typed inputs, set by Complete.
	source, destination resolve.Ref
	protocol            traceflow.Protocol
	dstPort             int32
	format              string
	useColor            bool
}

func newTraceCommand(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *cobra.Command {
	d := tracerun.DefaultOptions()
	o := &TraceOptions{IOStreams: streams, configFlags: cf, deps: deps,
		ttl: traceflow.DefaultTTL, timeout: d.Timeout,
		tcpFlags: traceflow.TCPFlagSYN, engine: "auto", expect: "delivered", color: "auto",
		helperImage: d.HelperImage, helperNamespace: d.HelperNamespace,
		ovsRunDir: d.OVSRunDir, ovnRunDir: d.OVNRunDir, bridge: d.Bridge, antreaNames: d.AntreaNames}
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
	f.Var(&enumValue{&o.expect, []string{"delivered", "dropped", "rejected", "refused", "any"}}, "expect",
		"the verdict that exits 0; another verdict exits 2 (with --round-trip, delivered means answered, and refused a delivered probe answered with a RST or an ICMP error)")
	f.BoolVar(&o.roundTrip, "round-trip", false,
		"helper engine: also follow the destination's answer (SYN-ACK, RST, echo reply, ICMP error) back to the source, hop by hop, and say whether it was answered, refused, lost on the way back, or unanswered; uses a second tag")
	f.Var(&enumValue{&o.color, []string{"auto", "always", "never"}}, "color", "colour the output: auto honours NO_COLOR and needs a terminal")
	f.Var(&dryRunValue{&o.dryRun}, "dry-run", "resolve and print the Traceflow that would be created, and create nothing")
	f.Lookup("dry-run").NoOptDefVal = "true"
	f.BoolVar(&o.keep, "keep", false, "keep the Traceflow record after the trace (default: delete it)")
	f.StringVar(&o.via, "via", "",
		"with SRC an address outside the cluster: node/NAME, the node whose uplink receives the packet (default: the destination node of a NodePort; needed for an externalIP or LoadBalancer IP)")
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
	if o.source.Kind == resolve.KindIP && o.source.IP.Is6() && o.destination.Kind != resolve.KindIP && !o.changed("ipv6") {
		o.ipv6 = true // so does an IPv6 source outside the cluster
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
	if err := tracerun.ValidateHelperImage(o.helperImage); err != nil {
		return exitcode.Wrap(exitcode.Usage, err)
	}
	if err := tracerun.ValidateOVSRunDir(o.ovsRunDir); err != nil {
		return exitcode.Wrap(exitcode.Usage, err)
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
	if err := o.validateRoundTrip(); err != nil {
		return err
	}
	if err := o.validateOutside(); err != nil {
		return err
	}
	if resolve.SameObject(o.source, dst) {
		return exitcode.UsageErrorf("SRC and DST are the same %s %q: trace to another pod, a Service, a node or an IP", dst.Kind, dst.Name)
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
		IPv6: o.ipv6, Protocol: o.protocol, DstPort: o.dstPort, Live: o.live, Via: o.via,
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
	tf := tracerun.Record(res, o.probe(), o.timeout, o.deps.Suffix())
	if o.dryRun {
		return o.print(o.Out, tf, res)
	}
	s := newSink(o.format, o.explain, o.useColor, o.Out, time.Now)
	opts := o.runOptions()
	// A second Ctrl-C removes what the trace created.
	opts.Abandon = newAbandoner(o.deps.Abandon, cleanupTail(o.helperNamespace, o.keep, o.configFlags))
	runner := &tracerun.Runner{Clients: clients, Options: opts, Emit: s.Emit, Notes: o.ErrOut}
	if o.format == outputJSON || o.format == outputYAML {
		// Structured output goes to stdout; the engine line, for people, to stderr.
		s.warnTo = o.ErrOut
		runner.Announce = func(line string) { _, _ = fmt.Fprintln(o.ErrOut, line) }
	}
	end, err := runner.Run(ctx, tracerun.Trace{Resolved: res, Record: tf})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return o.finish(s, tf, end, err)
}

// finish prints what the chosen format prints at the end, the one-line
// summary, and turns the verdict into the exit code.
func (o *TraceOptions) finish(s *sink, tf *traceflow.Traceflow, end outcome.Ended, err error) error {
	if !end.Started() {
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
	code, verr := outcome.RoundTripExitCode(end.Verdict, end.Reply, expect, end.Destination)
	if verr != nil && end.Reason != "" && (end.Reply == nil || end.Reply.Fate == outcome.Answered) {
		reason := end.Reason
		if end.Decided != nil && end.Decided.Inferred() {
			reason += " (predicted by OVS's trace, not observed)"
		}
		verr = fmt.Errorf("%w: %s", verr, reason)
	}
	return exitcode.Wrap(code, verr)
}

// probe is the packet the flags ask for.
func (o *TraceOptions) probe() tracerun.Probe {
	return tracerun.Probe{IPv6: o.ipv6, SrcPort: o.srcPort, TCPFlags: o.tcpFlags, TTL: o.ttl,
		Live: o.live, DroppedOnly: o.droppedOnly}
}

// runOptions are how the flags ask the trace to run; the caller says who
// is told what runs (Abandon).
func (o *TraceOptions) runOptions() tracerun.Options {
	return tracerun.Options{Engine: o.engine, Keep: o.keep, Timeout: o.timeout,
		HelperImage: o.helperImage, HelperNamespace: o.helperNamespace, OVSRunDir: o.ovsRunDir, OVNRunDir: o.ovnRunDir,
		Bridge: o.bridge, AntreaNames: o.antreaNames, RoundTrip: o.roundTrip}
}

// cleanupTail are the arguments of the cleanup a second Ctrl-C starts that
// follow its --trace flags, for traces with helpers in namespace ns. Unless
// keep, a record is removed even when finished: the trace may have written
// its verdict into it and been stopped before it deleted it. A second sweep
// 2 s later removes what the plugin's last requests created after the
// first sweep had listed.
func cleanupTail(ns string, keep bool, cf *genericclioptions.ConfigFlags) []string {
	tail := []string{"--helper-namespace", ns, "--request-timeout=5s", "--again-after=2s"}
	if !keep {
		tail = append(tail, "--all-records")
	}
	return append(tail, kubeconfigArgs(cf)...)
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
