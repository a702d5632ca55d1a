package report

import "flag"

// flagSet registers sub's flags, bound to a's fields, with their
// defaults; the help texts are what `traceflow-helper SUB --help` prints.
// A receive has only the flags every trace has. TCPFlags and TTL are
// parsed into variables of their own: given() points a at those the
// command line gave, once the flag set has parsed it.
func flagSet(sub Subcommand, a *HelperArgs) (fs *flag.FlagSet, given func()) {
	fs = flag.NewFlagSet(string(sub), flag.ContinueOnError)
	a.Subcommand = sub
	fs.StringVar(&a.OVSRunDir, "ovs-rundir", defaultOVSRunDir, "OVS run directory: db.sock, BRIDGE.mgmt and ovs-vswitchd.PID.ctl")
	fs.StringVar(&a.Bridge, "bridge", defaultBridge, "the OVS bridge that carries pod traffic")
	fs.StringVar(&a.Node, "node", "", "node name to report ($NODE_NAME, else the hostname)")
	fs.DurationVar(&a.Timeout, "timeout", defaultTimeout, "how long to wait for the probe; also the flows' hard_timeout")
	fs.UintVar(&a.Mark, "mark", 0, "the probe's mark in its IPv4 identification (low 16 bits) or IPv6 flow label, 1..0xfffff; sender and receivers of one trace must agree (default: derived from the tag; the plugin passes a random one)")
	fs.StringVar(&a.AntreaAgent, "antrea-agent", "", "HOST:PORT of the node's Antrea agent API (127.0.0.1:10350): name the policy and rule behind a conjunction id by asking it (needs --antrea-token readable)")
	fs.StringVar(&a.AntreaToken, "antrea-token", "", "the token Antrea's agent writes for its own antctl, used with --antrea-agent")
	fs.BoolVar(&a.StartOnStdin, "start-on-stdin", false, "start, then wait for a line on standard input before installing flows (the plugin's word: at once for a receiver, once every receiver is ready for a sender); the plugin then reads the report through the same attach, without the kubelet's log lag")
	fs.BoolVar(&a.Brief, "brief", false, "leave OVS's trace text and the hop list out of the result line's explanation (its summary and datapath actions stay): every hop is on an observation line already, and the result line stays a few KiB instead of tens")
	fs.UintVar(&a.ReplyTag, "reply-tag", 0, "follow the destination's answer to the probe too (a round trip), tagging it with this tag (a DSCP value 1..63, plus 64 or 128 for ECN ECT(1) or ECT(0)), not the probe's; sender and receivers of one trace must agree")
	if sub != SubcommandTrace {
		fs.UintVar(&a.Tag, "tag", 0, "the probe's tag: a DSCP value 1..63, plus 64 or 128 where the probe carries ECN ECT(1) or ECT(0) (required)")
		return fs, func() {}
	}
	fs.UintVar(&a.Tag, "tag", 0, "the probe's tag: a DSCP value 1..63, plus 64 or 128 where the probe carries ECN ECT(1) or ECT(0) (default: random, from the helper's pool, none of Antrea's tags nor a code point real traffic uses)")
	p := &a.Probe
	fs.StringVar(&p.SourcePod, "source-pod", "", "inject at this pod's port: NAMESPACE/NAME (Antrea pod-namespace/pod-name or OVN-Kubernetes iface-id)")
	fs.StringVar(&p.InPort, "in-port", "", "inject at this OVS port (instead of --source-pod)")
	fs.BoolVar(&p.SourceNode, "source-node", false, "inject as the node itself: at the bridge's port through which the node's kernel routes to --destination, from that route's source address (instead of --source-pod)")
	fs.BoolVar(&p.SourceOutside, "source-outside", false, "inject as a packet from --source-ip, an address outside the cluster, arriving on the node's uplink: into the bridge at the patch port through which the uplink bridge sends it, where OVS's trace of the uplink bridge says it does (instead of --source-pod)")
	fs.BoolVar(&p.ReplyTranslated, "reply-translated", false, "with --reply-tag, the destination is outside the pod network: where the pipeline translates the probe's source on its way out (a gateway router's SNAT), also catch the answer from the destination at the translated address and port, as the probe shows them where a continuation pauses it")
	fs.StringVar(&p.Destination, "destination", "", "destination IP (IPv4 or IPv6, required)")
	fs.UintVar(&p.TCP, "tcp", 0, "probe TCP to this destination port (default: TCP 80 unless --udp or --icmp)")
	fs.UintVar(&p.UDP, "udp", 0, "probe UDP to this destination port")
	fs.BoolVar(&p.ICMP, "icmp", false, "probe with an ICMP (ICMPv6) echo request")
	fs.UintVar(&p.SourcePort, "source-port", 0, "TCP/UDP source port (default 32768+tag)")
	var tcpFlags, ttl uint
	fs.UintVar(&tcpFlags, "tcp-flags", DefaultTCPFlags, "TCP flags byte (2 = SYN)")
	fs.UintVar(&ttl, "ttl", DefaultTTL, "IP TTL / hop limit")
	fs.StringVar(&p.SourceIP, "source-ip", "", "probe source IP (default: the port's external_ids ip, ip_addresses or ip-address)")
	fs.StringVar(&p.SourceMAC, "source-mac", "", "probe source MAC (default: the port's external_ids mac, attached_mac or attached-mac)")
	fs.BoolVar(&a.StartOnStdin, "inject-on-stdin", false, "the same as --start-on-stdin (the name earlier plugins pass a sender)")
	fs.StringVar(&p.DestinationMAC, "destination-mac", "", "probe destination MAC (default: the local destination pod's MAC, else the gateway port's)")
	return fs, func() {
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "tcp-flags":
				p.TCPFlags = &tcpFlags
			case "ttl":
				p.TTL = &ttl
			}
		})
	}
}
