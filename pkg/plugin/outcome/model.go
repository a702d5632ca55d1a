// Package outcome is the domain of a trace's result: the hops (each seen or
// only inferred from OVS's trace), the verdict and the hop that decided it,
// the expectation and its exit code. The engines (helper mode, agent mode)
// produce typed updates; Model.Apply folds them into the one model that
// the record and every renderer read. Nothing here talks to the cluster or
// draws anything.
package outcome

import (
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// Update is one thing that happened to a trace.
type Update interface {
	// When is the time the update happened, from the producer's clock.
	When() time.Time
}

// At is embedded in every update to carry its time.
type At struct{ Time time.Time }

// When implements Update.
func (a At) When() time.Time { return a.Time }

// TraceStarted is an update: the trace is recorded and an engine chosen.
type TraceStarted struct {
	At
	Name         string
	Engine       string // "helper" or "agent"
	EngineReason string
	Source       string
	Destination  string
	// DestinationKind is what Destination is; it decides whether leaving
	// the pod network satisfies --expect delivered.
	DestinationKind DestinationKind
	Packet          string // "TCP 80 SYN", "ICMP echo", ...
	Tag             uint8
}

// Tagged is an update: the engine learned the trace's dataplane tag after
// it started (Antrea assigns it when the trace runs, and removes it from
// the record when the trace succeeds; the model keeps it).
type Tagged struct {
	At
	Tag uint8
}

// HelperWaiting is an update: a helper on Node is not running yet, for Reason
// ("scheduled", "pulling image", "ContainerCreating").
type HelperWaiting struct {
	At
	Node   string
	Role   report.Role
	Reason string
}

// HelperReady is an update: the helper on Node installed its flows and is listening.
type HelperReady struct {
	At
	Node    string
	Role    report.Role
	Version string
}

// Injected is an update: the sender put the probe into its bridge.
type Injected struct {
	At
	Node string
}

// Hop is one observation of the packet, with how OVS explains it. Whether
// it was seen or only inferred is Observation.Inferred, so the record
// carries it as it is.
type Hop struct {
	Node        string
	Role        report.Role
	Observation report.Observation
	// TableID, TableName, Flow and Cookie name the OpenFlow flow that did it.
	TableID   int
	TableName string
	Flow      string
	Cookie    uint64
	// NoPipeline: no flow matched, and the bridge held no flow besides
	// traces' at that moment (its CNI had not programmed it).
	NoPipeline bool
	// PolicyUnknown says why the helper could not name the policy of the
	// rule this hop went through (its conjunction id is all the flows
	// say): Antrea's agent could not be asked, say.
	PolicyUnknown string
}

// Inferred reports whether the packet was not seen at this hop, only
// predicted (by OVS's trace of the same packet).
func (h Hop) Inferred() bool { return h.Observation.Inferred }

// Observed is an update: the packet was seen at a hop.
type Observed struct {
	At
	Hop Hop
}

// Warning is an update: something the user should know that does not stop the trace.
type Warning struct {
	At
	Node    string
	Message string
}

// Finished is an update: the trace ended with a verdict, a reason that
// says where in words, and the hop that decided it (nil for Incomplete and
// Failed).
type Finished struct {
	At
	Verdict Verdict
	Reason  string
	Decided *Hop
	// Reply is what came back, for a round trip (nil otherwise).
	Reply *ReplyEnd
}

// Retried is an update: the trace so far did not say where the packet
// ended (Antrea's agents reported no end), and it runs again with another
// engine, which starts with its own TraceStarted. Why says why, in the
// user's words; the model forgets the first run's nodes and verdict, not
// its warnings.
type Retried struct {
	At
	Why string
}

// Predicted reports whether the verdict rests on a hop that was only
// inferred from OVS's trace, not seen.
func (f Finished) Predicted() bool { return f.Decided != nil && f.Decided.Inferred() }

// NodeState is what the model knows of one node's helper or agent.
type NodeState struct {
	Name    string
	Role    report.Role
	Waiting string // non-empty while the helper is not ready
	Ready   bool
	Hops    []TimedHop
}

// TimedHop is a hop with its time.
type TimedHop struct {
	Hop
	At time.Time
}

// Model is the state of one trace as the user sees it.
type Model struct {
	Trace      TraceStarted
	Started    time.Time
	InjectedAt time.Time // zero until injected
	Nodes      []*NodeState
	Finished   *Finished
	Warnings   []Warning
}

// Apply folds u into the model.
func (m *Model) Apply(u Update) {
	switch u := u.(type) {
	case TraceStarted:
		m.Trace = u
		m.Started = u.Time
	case Tagged:
		m.Trace.Tag = u.Tag
	case HelperWaiting:
		n := m.node(u.Node, u.Role)
		n.Waiting = u.Reason
	case HelperReady:
		n := m.node(u.Node, u.Role)
		n.Waiting, n.Ready = "", true
	case Injected:
		m.InjectedAt = u.Time
	case Observed:
		n := m.node(u.Hop.Node, u.Hop.Role)
		n.Hops = append(n.Hops, TimedHop{Hop: u.Hop, At: u.Time})
	case Warning:
		m.Warnings = append(m.Warnings, u)
	case Finished:
		f := u
		m.Finished = &f
	case Retried:
		m.Nodes, m.Finished, m.InjectedAt = nil, nil, time.Time{}
		m.Warnings = append(m.Warnings, Warning{At: u.At, Message: u.Why})
	}
}

// node returns the state of name, adding it in path order: the sender
// first, receivers after, each in order of first appearance; a node's part
// of the answer's way back (RoleReply) is a state of its own, after them.
func (m *Model) node(name string, role report.Role) *NodeState {
	for _, n := range m.Nodes {
		if n.Name == name && (n.Role == report.RoleReply) == (role == report.RoleReply) {
			if n.Role == "" {
				n.Role = role
			}
			return n
		}
	}
	n := &NodeState{Name: name, Role: role}
	if role == report.RoleSender {
		m.Nodes = append([]*NodeState{n}, m.Nodes...)
	} else {
		m.Nodes = append(m.Nodes, n)
	}
	return n
}

// Since returns t relative to injection (or to the start, before injection).
func (m *Model) Since(t time.Time) time.Duration {
	base := m.InjectedAt
	if base.IsZero() {
		base = m.Started
	}
	if base.IsZero() || t.Before(base) {
		return 0
	}
	return t.Sub(base)
}

// AllHops returns every hop in path order: node by node, each node's hops
// in the order they happened.
func (m *Model) AllHops() []TimedHop {
	var hops []TimedHop
	for _, n := range m.Nodes {
		hops = append(hops, n.Hops...)
	}
	return hops
}

// Verdict is the trace's verdict so far: Incomplete until it finished.
func (m *Model) Verdict() Verdict {
	if m.Finished == nil {
		return Incomplete
	}
	return m.Finished.Verdict
}

// ExitCode is the exit code of the trace as it stands, for want; see
// ExitCode.
func (m *Model) ExitCode(want Expect) (exitcode.Code, error) {
	var reply *ReplyEnd
	if m.Finished != nil {
		reply = m.Finished.Reply
	}
	return RoundTripExitCode(m.Verdict(), reply, want, m.Trace.DestinationKind)
}

// Counts returns the number of hops and how many of them were inferred.
func (m *Model) Counts() (hops, inferred int) {
	for _, n := range m.Nodes {
		for _, h := range n.Hops {
			hops++
			if h.Inferred() {
				inferred++
			}
		}
	}
	return hops, inferred
}
