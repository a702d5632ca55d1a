package cli

import (
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// validateOutside checks a source outside the cluster (SRC an IP address)
// and --via against the flags they cannot go with; what the cluster must
// say (the Service it reaches, the via node) is checked in resolution.
func (o *TraceOptions) validateOutside() error {
	outside := o.source.Kind == resolve.KindIP
	if o.via != "" {
		kind, name, ok := strings.Cut(o.via, "/")
		if !ok {
			kind, name = "node", o.via
		}
		if k := strings.ToLower(kind); k != "node" && k != "nodes" && k != "no" || name == "" || strings.Contains(name, "/") {
			return exitcode.UsageErrorf("--via %q: want node/NAME, a node of the cluster", o.via)
		}
		o.via = name
		if !outside {
			return exitcode.UsageErrorf("--via says which node's uplink receives a packet from outside the cluster, and SRC %s is in it: drop --via, or give an outside address as SRC", o.source)
		}
	}
	switch {
	case !outside:
		return nil
	case o.live:
		return exitcode.UsageErrorf("--live traces a pod's own traffic, and SRC %s is an address outside the cluster: drop --live", o.source.IP)
	case o.engine == "agent":
		return exitcode.UsageErrorf("--engine agent: Antrea's Traceflow starts at a pod's own port, and SRC %s is outside the cluster: use --engine helper (or auto), which injects where the node's uplink receives it", o.source.IP)
	case o.allEndpoints:
		return exitcode.UsageErrorf("--all-endpoints traces from a pod to each endpoint; from outside (SRC %s) trace the NodePort, externalIP or LoadBalancer IP itself", o.source.IP)
	case o.protocol != traceflow.TCP && o.protocol != traceflow.UDP:
		return exitcode.UsageErrorf("from outside (SRC %s) a packet reaches a Service on a port (its NodePort, externalIP or LoadBalancer IP): give --tcp PORT or --udp PORT", o.source.IP)
	case o.source.IP.Is6() != o.ipv6:
		return exitcode.UsageErrorf("SRC %s is an IPv%s address and the trace is over IPv%s (from DST or --ipv6): give SRC and DST of one family", o.source.IP, map[bool]string{true: "6", false: "4"}[o.source.IP.Is6()], map[bool]string{true: "6", false: "4"}[o.ipv6])
	}
	return nil
}

// validateRoundTrip checks --round-trip against the flags it cannot go
// with, and --expect refused, which only a round trip can meet.
func (o *TraceOptions) validateRoundTrip() error {
	switch {
	case o.expect == string(outcome.ExpectRefused) && !o.roundTrip:
		return exitcode.UsageErrorf("--expect refused needs the answer: add --round-trip")
	case !o.roundTrip:
		return nil
	case o.live:
		return exitcode.UsageErrorf("--round-trip follows the answer to the helper's probe; --live traces real traffic with Antrea's agents: drop one of them")
	case o.engine == "agent":
		return exitcode.UsageErrorf("--engine agent: Antrea's Traceflow follows the probe one way only: use --engine helper (or auto) for --round-trip, or drop --round-trip")
	case o.allEndpoints:
		return exitcode.UsageErrorf("--round-trip is not supported with --all-endpoints yet: trace to each endpoint on its own")
	}
	return nil
}
