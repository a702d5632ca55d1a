package tracer

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// emitTranslation reports that a load balancer translated the probe's
// destination to dstIP, attributed to the table natTable finds for hop i.
func (w *watcher) emitTranslation(ctx context.Context, dstIP netip.Addr, i int) error {
	w.translated = true
	return w.emit(ctx, report.Observation{
		Component: report.ComponentLB, ComponentInfo: w.s.natTable(w.p.t, i), Action: report.ActionForwarded,
		TranslatedDstIP: dstIP.String(),
	}, nil)
}

// emitSourceTranslation reports that the probe, seen at hop i with the
// source srcIP, had its source translated (SNAT): the real packet says
// so, attributed to the last hop up to i whose flow asks conntrack for a
// source NAT (else the last conntrack hop).
func (w *watcher) emitSourceTranslation(ctx context.Context, srcIP netip.Addr, i int) error {
	w.s.srcTranslated = true
	hn := w.s.names.NameHop(w.p.t.Hops[conntrackHop(w.p.t.Hops[:i+1], func(a string) bool { return strings.Contains(a, "nat(src=") })])
	return w.emit(ctx, report.Observation{
		Component: hn.Component, ComponentInfo: hn.Where, Action: report.ActionForwarded,
		TranslatedSrcIP: srcIP.String(),
	}, nil)
}

// emitPortMove reports that the probe, seen at hop i from its own address
// but from port to, had its source port moved by conntrack: a translation
// (a Service's DNAT) whose answer's addresses and ports a tracked
// connection holds already, such as an earlier probe's from the same port
// that is still closing, gets another source port, as a real client's
// connection would. It is attributed to the last conntrack hop with a NAT
// up to i (else the last conntrack hop).
func (w *watcher) emitPortMove(ctx context.Context, to uint16, i int) error {
	w.portMoved = true
	hn := w.s.names.NameHop(w.p.t.Hops[conntrackHop(w.p.t.Hops[:i+1], func(a string) bool { return strings.HasPrefix(a, "ct(") && strings.Contains(a, "nat") })])
	return w.emit(ctx, report.Observation{
		Component: hn.Component, Action: report.ActionForwarded,
		ComponentInfo: fmt.Sprintf("%s: conntrack moved the probe's source port from %d to %d (a connection it still tracks, such as an earlier one from the same port, holds the answer's addresses and ports); the answer comes back to %d until conntrack undoes it",
			hn.Where, w.s.probeSrcPort, to, to),
	}, nil)
}

// conntrackHop is the last of hops with an action nat accepts, else the
// last with a conntrack action, else the last hop: where a translation
// the real packet shows was made.
func conntrackHop(hops []ofproto.Hop, nat func(string) bool) int {
	if j := lastHopWith(hops, nat); j >= 0 {
		return j
	}
	if j := lastHopWith(hops, func(a string) bool { return strings.Contains(a, "ct(") }); j >= 0 {
		return j
	}
	return len(hops) - 1
}

// lastHopWith is the index of the last of hops with an action that want
// accepts, or -1.
func lastHopWith(hops []ofproto.Hop, want func(string) bool) int {
	for j := len(hops) - 1; j >= 0; j-- {
		if slices.ContainsFunc(hops[j].Actions, want) {
			return j
		}
	}
	return -1
}
