package outcome

import (
	"fmt"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// Verdict is how a trace ended.
type Verdict string

// Verdicts.
const (
	// Delivered: the packet reached the destination (the destination pod,
	// or an endpoint of the destination Service).
	Delivered Verdict = "Delivered"
	// ForwardedOutOfNetwork: the packet left the pod network (through the
	// gateway, the uplink or a tunnel to outside the cluster).
	ForwardedOutOfNetwork Verdict = "ForwardedOutOfNetwork"
	Dropped               Verdict = "Dropped"
	Rejected              Verdict = "Rejected"
	// Incomplete: the trace timed out before the packet reached an end.
	Incomplete Verdict = "Incomplete"
	// Failed: the trace could not run (setup, RBAC, helper start).
	Failed Verdict = "Failed"
)

// Completed reports whether the trace ran to the packet's end (as opposed
// to timing out or failing to run): its record's phase is Succeeded.
func (v Verdict) Completed() bool {
	switch v {
	case Delivered, ForwardedOutOfNetwork, Dropped, Rejected:
		return true
	}
	return false
}

// OfAction maps a hop's action to the verdict it decides, and reports
// whether it decides one at all: Forwarded and Received end nothing. This
// is the one place that says which actions end a packet's path.
func OfAction(a report.Action) (Verdict, bool) {
	switch a.Normalize() {
	case report.ActionDelivered:
		return Delivered, true
	case report.ActionForwardedOutOfNetwork:
		return ForwardedOutOfNetwork, true
	case report.ActionDropped:
		return Dropped, true
	case report.ActionRejected:
		return Rejected, true
	}
	return "", false
}

// Decide derives the verdict from the hops in path order: the packet's fate
// is the action of the last hop that ends a path, and that hop is where the
// verdict was decided. A path whose last hop is Forwarded (into a tunnel
// that no receiver reported on, say) is Incomplete, decided nowhere.
func Decide(hops []TimedHop) (Verdict, *Hop) {
	for i := len(hops) - 1; i >= 0; i-- {
		if v, ok := OfAction(hops[i].Observation.Action); ok {
			h := hops[i].Hop
			return v, &h
		}
	}
	return Incomplete, nil
}

// Expect is what the user said the packet should do (--expect).
type Expect string

// Expectations.
const (
	ExpectDelivered Expect = "delivered"
	ExpectDropped   Expect = "dropped"
	ExpectRejected  Expect = "rejected"
	ExpectAny       Expect = "any"
)

// DestinationKind is what the destination is, as resolution found it: it
// decides whether leaving the pod network is the end the user wanted.
type DestinationKind string

// Destination kinds.
const (
	// DestinationPod is a pod on the pod network.
	DestinationPod DestinationKind = "pod"
	// DestinationService is a Service: delivered means to one of its endpoints.
	DestinationService DestinationKind = "service"
	// DestinationPodIP is an IP that a pod of the cluster holds.
	DestinationPodIP DestinationKind = "ip-in-cluster-pods"
	// DestinationOutside is anything else: a node's IP (or a host-network
	// pod's), an address outside the cluster.
	DestinationOutside DestinationKind = "outside"
)

// onPodNetwork reports whether the destination is a pod of the cluster's
// pod network, so that leaving the pod network does not reach it. An
// unknown kind is taken as outside, the lenient reading of old callers.
func (k DestinationKind) onPodNetwork() bool {
	return k == DestinationPod || k == DestinationService || k == DestinationPodIP
}

// ReachedDestination reports whether v means the packet got where it was
// sent: delivered, or, for a destination outside the cluster's pods, out of
// the pod network. This is what --expect delivered asks for.
func ReachedDestination(v Verdict, dst DestinationKind) bool {
	return v == Delivered || (v == ForwardedOutOfNetwork && !dst.onPodNetwork())
}

// ExitCode maps a verdict, the expectation and the destination's kind to
// the CI contract of DESIGN.md. The error, for a non-zero code, says what
// happened and what was expected. It is the one place verdicts become exit
// codes.
func ExitCode(v Verdict, want Expect, dst DestinationKind) (exitcode.Code, error) {
	switch v {
	case Incomplete:
		return exitcode.Timeout, fmt.Errorf("the trace did not complete before its timeout: raise --timeout, or check that the helpers could see the packet")
	case Failed:
		return exitcode.Setup, fmt.Errorf("the trace could not run")
	}
	if want == "" {
		want = ExpectDelivered
	}
	ok := false
	switch want {
	case ExpectAny:
		ok = true
	case ExpectDelivered:
		ok = ReachedDestination(v, dst)
	case ExpectDropped:
		ok = v == Dropped || v == Rejected
	case ExpectRejected:
		ok = v == Rejected
	}
	if ok {
		return exitcode.OK, nil
	}
	if v == ForwardedOutOfNetwork && want == ExpectDelivered {
		return exitcode.Verdict, fmt.Errorf("packet %s, expected %s: it left the pod network (through the gateway or the uplink) and was not seen reaching the destination %s; trace from the node it was routed to, or check the routes to the destination", v, want, dst)
	}
	return exitcode.Verdict, fmt.Errorf("packet %s, expected %s", v, want)
}
