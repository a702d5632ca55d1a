// Package report is the wire contract between the node helper and the plugin:
// the JSON lines a helper prints on stdout, and the per-node result in the
// shape of the status of Antrea's crd.antrea.io/v1beta1 Traceflow. It is the
// only package that both the helper and the plugin import.
package report

// Component is the part of the dataplane an observation comes from, with
// Antrea's names.
type Component string

// Components, as Antrea names them.
const (
	ComponentSpoofGuard    Component = "SpoofGuard"
	ComponentLB            Component = "LB"
	ComponentRouting       Component = "Routing"
	ComponentNetworkPolicy Component = "NetworkPolicy"
	ComponentForwarding    Component = "Forwarding"
	ComponentEgress        Component = "Egress"
)

// Action is what a component did with the packet, with Antrea's names.
type Action string

// Actions, as Antrea names them.
const (
	ActionDelivered             Action = "Delivered"
	ActionReceived              Action = "Received"
	ActionForwarded             Action = "Forwarded"
	ActionDropped               Action = "Dropped"
	ActionRejected              Action = "Rejected"
	ActionForwardedOutOfNetwork Action = "ForwardedOutOfNetwork"
	// ActionForwardedOutOfOverlay is what Antrea before v1.12 reports for
	// ForwardedOutOfNetwork; readers accept both, writers use the newer one.
	ActionForwardedOutOfOverlay Action = "ForwardedOutOfOverlay"
)

// Normalize maps older spellings to the current ones.
func (a Action) Normalize() Action {
	if a == ActionForwardedOutOfOverlay {
		return ActionForwardedOutOfNetwork
	}
	return a
}

// Role says whether a node sent the probe or received it.
type Role string

// Roles, as Antrea names them.
const (
	RoleSender   Role = "Sender"
	RoleReceiver Role = "Receiver"
	// RoleReply is ours, not Antrea's: a node's part of the answer's way
	// back to the source (a round trip).
	RoleReply Role = "Reply"
)

// NodeResult is one node's part of a Traceflow status (status.results[]).
type NodeResult struct {
	// Node is the name of the node that observed the packet.
	Node string `json:"node,omitempty"`
	// Role is Sender or Receiver.
	Role Role `json:"role,omitempty"`
	// Timestamp is the Unix time (seconds) of the node's first observation.
	Timestamp int64 `json:"timestamp,omitempty"`
	// Observations are the hops on this node, in the order the packet took them.
	Observations []Observation `json:"observations,omitempty"`
	// TableHops are, where Observations summarise a helper's hops in
	// Antrea's words (two or three a node, as Antrea's agent reports),
	// every OpenFlow table the probe passed on the node, each with the
	// observation the helper made there. Antrea's schema has no such field;
	// the plugin prints it in -o json and -o yaml, and writes it to its own
	// record (kept with --keep).
	TableHops []TableHop `json:"tableHops,omitempty"`
}

// TableHop is one OpenFlow table the probe passed: the table, the flow
// that matched it and its cookie, and the helper's observation there.
type TableHop struct {
	Table     int    `json:"table"`
	TableName string `json:"tableName,omitempty"`
	Flow      string `json:"flow,omitempty"`
	Cookie    string `json:"cookie,omitempty"`
	Observation
}

// Observation is one hop (crd.antrea.io/v1beta1 Traceflow status.results[].observations[]).
type Observation struct {
	Component         Component `json:"component,omitempty"`
	ComponentInfo     string    `json:"componentInfo,omitempty"`
	Action            Action    `json:"action,omitempty"`
	Pod               string    `json:"pod,omitempty"`
	DstMAC            string    `json:"dstMAC,omitempty"`
	NetworkPolicy     string    `json:"networkPolicy,omitempty"`
	NetworkPolicyRule string    `json:"networkPolicyRule,omitempty"`
	Egress            string    `json:"egress,omitempty"`
	TTL               int32     `json:"ttl,omitempty"`
	TranslatedSrcIP   string    `json:"translatedSrcIP,omitempty"`
	TranslatedDstIP   string    `json:"translatedDstIP,omitempty"`
	TunnelDstIP       string    `json:"tunnelDstIP,omitempty"`
	EgressIP          string    `json:"egressIP,omitempty"`
	EgressNode        string    `json:"egressNode,omitempty"`
	SrcPodIP          string    `json:"srcPodIP,omitempty"`
	// Inferred is true where the real probe was not seen at this hop and
	// only OVS's trace (or another prediction) accounts for it. Antrea's
	// schema has no such field; the plugin's own CRD carries it.
	Inferred bool `json:"inferred,omitempty"`
}
