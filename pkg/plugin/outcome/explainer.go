package outcome

import (
	"context"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// DropExplainer names what dropped the probe where the engine could name
// only the table and flow (a Kubernetes NetworkPolicy's default deny):
// both engines call one (package explain) on every drop they report, so
// that a drop reads the same whichever engine traced it.
type DropExplainer interface {
	// ExplainDrop returns o, a drop, with the policy and rule behind it
	// where it can tell them, else o unchanged; hops are the trace's hops
	// before o, in path order.
	ExplainDrop(ctx context.Context, hops []TimedHop, o report.Observation) report.Observation
}
