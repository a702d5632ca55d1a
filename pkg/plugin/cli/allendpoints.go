package cli

import (
	"context"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
)

// validateAllEndpoints checks --all-endpoints against the other flags: it
// runs several traces, reported as `check` reports them.
func (o *TraceOptions) validateAllEndpoints() error {
	switch {
	case o.destination.Kind != resolve.KindService:
		return exitcode.UsageErrorf("--all-endpoints traces a Service's endpoints, and DST %s is no Service: write svc/NAME, or drop --all-endpoints", o.destination)
	case o.dryRun:
		return exitcode.UsageErrorf("--all-endpoints with --dry-run: drop one (a dry run prints one Traceflow)")
	case o.live:
		return exitcode.UsageErrorf("--all-endpoints with --live: drop one (live traffic takes the endpoint the Service picks)")
	case o.ipv6:
		return exitcode.UsageErrorf("--all-endpoints traces IPv4 endpoints: drop --ipv6")
	case o.output == outputYAML:
		return exitcode.UsageErrorf("--all-endpoints reports several traces: use -o json (one object per trace) or plain")
	}
	return nil
}

// runAllEndpoints runs the trace through the Service and one to each of
// its ready endpoints, as a one-case suite.
func (o *TraceOptions) runAllEndpoints(ctx context.Context) error {
	co := &CheckOptions{
		IOStreams: o.IOStreams, configFlags: o.configFlags, deps: o.deps,
		parallel: defaultParallel, timeout: o.timeout, engine: o.engine,
		helperImage: o.helperImage, helperNamespace: o.helperNamespace, ovsRunDir: o.ovsRunDir, bridge: o.bridge,
		template: o, suites: []*check.Suite{{Cases: []check.Case{o.allEndpointsCase()}}}, format: o.format, useColor: o.useColor,
	}
	return co.Run(ctx)
}

// allEndpointsCase is the case --all-endpoints runs: from the pod or the
// node SRC names to the Service, and to each of its endpoints.
func (o *TraceOptions) allEndpointsCase() check.Case {
	from := check.From{Namespace: o.source.Namespace, Pod: o.source.Name, Pick: check.PickFirst}
	if o.source.Kind == resolve.KindNode {
		from = check.From{Node: o.source.Name}
	}
	return check.Case{
		Name: o.source.String() + " -> " + o.destination.String(),
		From: from,
		To:   check.To{Namespace: o.destination.Namespace, Service: o.destination.Name, AllEndpoints: true},
		// A Service without --tcp or --udp gets its first port, as without
		// --all-endpoints.
		Protocol: o.protocol, Port: o.dstPort, Expect: outcome.Expect(o.expect), Timeout: o.timeout,
	}
}
