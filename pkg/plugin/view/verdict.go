package view

import (
	"fmt"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// Verdict is how a trace ended.
type Verdict string

// Verdicts.
const (
	Delivered             Verdict = "Delivered"
	ForwardedOutOfNetwork Verdict = "ForwardedOutOfNetwork"
	Dropped               Verdict = "Dropped"
	Rejected              Verdict = "Rejected"
	// Incomplete: the trace timed out before the packet reached an end.
	Incomplete Verdict = "Incomplete"
	// Failed: the trace could not run (setup, RBAC, helper start).
	Failed Verdict = "Failed"
)

// Expect is what the user said the packet should do (--expect).
type Expect string

// Expectations.
const (
	ExpectDelivered Expect = "delivered"
	ExpectDropped   Expect = "dropped"
	ExpectRejected  Expect = "rejected"
	ExpectAny       Expect = "any"
)

// FromHops derives the verdict from the hops in path order: the packet's
// fate is the action of the last hop that ends a path. Forwarded hops end
// nothing; a path whose last hop is Forwarded into a tunnel that no receiver
// reported on is Incomplete.
func FromHops(hops []TimedHop) Verdict {
	for i := len(hops) - 1; i >= 0; i-- {
		switch hops[i].Observation.Action.Normalize() {
		case report.ActionDelivered:
			return Delivered
		case report.ActionForwardedOutOfNetwork:
			return ForwardedOutOfNetwork
		case report.ActionDropped:
			return Dropped
		case report.ActionRejected:
			return Rejected
		}
	}
	return Incomplete
}

// ExitCode maps a verdict and an expectation to the CI contract of
// DESIGN.md. The error, for a non-zero code, says what happened and what
// was expected.
func ExitCode(v Verdict, want Expect) (exitcode.Code, error) {
	switch v {
	case Incomplete:
		return exitcode.Timeout, fmt.Errorf("the trace did not complete before its timeout: raise --timeout, or check that the helpers could see the packet")
	case Failed:
		return exitcode.Setup, fmt.Errorf("the trace could not run")
	}
	ok := false
	switch want {
	case ExpectAny:
		ok = true
	case ExpectDelivered, "":
		ok = v == Delivered || v == ForwardedOutOfNetwork
	case ExpectDropped:
		ok = v == Dropped || v == Rejected
	case ExpectRejected:
		ok = v == Rejected
	}
	if ok {
		return exitcode.OK, nil
	}
	if want == "" {
		want = ExpectDelivered
	}
	return exitcode.Verdict, fmt.Errorf("packet %s, expected %s", v, want)
}
