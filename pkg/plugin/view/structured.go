package view

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Record is the structured output: the trace record (spec and metadata from
// base) with its status as the model saw it: phase, tag, start time and the
// per-node results in path order, each observation with inferred: true
// where it was only predicted; the verdict and, for a failure, its reason.
// On Antrea's pipeline a node's observations are Antrea's summary of its
// hops (outcome.AntreaSummary) and tableHops holds every hop; a record kept
// with --keep says the same (outcome.NodeResult).
// Like every renderer it only reads the model.
func Record(m *outcome.Model, base *traceflow.Traceflow) *traceflow.Traceflow {
	out := &traceflow.Traceflow{}
	if base != nil {
		*out = *base
		out.Status = traceflow.Status{}
	}
	out.APIVersion, out.Kind = traceflow.APIVersion, traceflow.Kind
	ann := make(map[string]string, len(out.Annotations)+1)
	for k, v := range out.Annotations {
		ann[k] = v
	}
	st := &out.Status
	st.DataplaneTag = int8(dscp.Value(m.Trace.Tag))
	st.Phase = traceflow.PhaseRunning
	if !m.Started.IsZero() {
		t := metav1.NewTime(m.Started)
		st.StartTime = &t
	}
	for _, n := range m.Nodes {
		if len(n.Hops) == 0 {
			continue
		}
		st.Results = append(st.Results, m.NodeResult(n))
	}
	if f := m.Finished; f != nil {
		ann[labels.VerdictAnnotation] = string(f.Verdict)
		if f.Reply != nil {
			ann[labels.ReplyAnnotation] = string(f.Reply.Fate)
		}
		st.Phase = traceflow.PhaseSucceeded
		if !f.Verdict.Completed() {
			st.Phase, st.Reason = traceflow.PhaseFailed, f.Reason
		}
	}
	out.Annotations = ann
	return out
}
