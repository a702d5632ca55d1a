// Package labels holds the label and annotation keys kubectl-traceflow puts
// on what it creates (Traceflow records, helper pods, tag-claim Leases, the
// objects of `kubectl traceflow install`). They are one contract with the
// cluster: a sweep finds by them what a killed plugin left, and one trace's
// pods, claims and record are tied together by them, so every package that
// writes or reads them takes them from here and none can drift.
package labels

const (
	// ManagedBy is the well-known label that marks what kubectl-traceflow
	// created; `kubectl traceflow cleanup` sweeps by it.
	ManagedBy = "app.kubernetes.io/managed-by"
	// Manager is ManagedBy's value, and the field manager of every write,
	// so that server-side field ownership names the same owner.
	Manager = "kubectl-traceflow"
	// Selector selects everything kubectl-traceflow created.
	Selector = ManagedBy + "=" + Manager

	// Trace names the trace a helper pod or a tag claim belongs to, so that
	// a sweep can tell a live trace's objects from those left behind.
	Trace = "traceflow.kubectl-traceflow.io/trace"
	// Role says what a helper pod does in its trace (helperpod.Role).
	Role = "traceflow.kubectl-traceflow.io/role"

	// TagAnnotation carries a helper-mode trace's dataplane tag on its pods
	// and on its Traceflow record, where status.dataplaneTag never does:
	// Antrea's agents trace any Traceflow whose status is Running with a
	// tag, and read no annotation.
	TagAnnotation = "traceflow.kubectl-traceflow.io/dataplane-tag"
	// VerdictAnnotation carries the verdict on the record that -o json|yaml
	// prints.
	VerdictAnnotation = "traceflow.kubectl-traceflow.io/verdict"
	// ReplyAnnotation carries a round trip's answer's fate (Answered,
	// Refused, Lost, Unanswered) next to the verdict, on the printed
	// record and on a kept one.
	ReplyAnnotation = "traceflow.kubectl-traceflow.io/reply"
	// SourceNodeAnnotation names the node a helper-mode probe starts from
	// (SRC node/NAME), which a Traceflow's source cannot say.
	SourceNodeAnnotation = "traceflow.kubectl-traceflow.io/source-node"
	// DestinationNodeAnnotation names the node whose address is the
	// destination (DST node/NAME); spec.destination.ip holds the address.
	DestinationNodeAnnotation = "traceflow.kubectl-traceflow.io/destination-node"
	// ViaAnnotation names the node whose uplink receives a probe from
	// outside the cluster (SRC an address, spec.source.ip).
	ViaAnnotation = "traceflow.kubectl-traceflow.io/via"
	// EntryAnnotation says how a probe from outside reaches the
	// destination Service (NodePort, externalIP, LoadBalancer IP), whose
	// address spec.destination.ip holds.
	EntryAnnotation = "traceflow.kubectl-traceflow.io/entry"
)
