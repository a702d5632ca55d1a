// Package traceflow is the trace record: Go types with the JSON of Antrea's
// crd.antrea.io/v1beta1 Traceflow, a pure builder for it, a client over the
// dynamic client, and the CRD manifest for clusters without Antrea.
//
// The types are our own (antrea.io/antrea is not a dependency) but must
// marshal exactly as Antrea's do, so that Antrea's controller and tools and
// ours read the same objects.
package traceflow

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Group, Version, Kind and Resource name Antrea's Traceflow API.
const (
	Group    = "crd.antrea.io"
	Version  = "v1beta1"
	Kind     = "Traceflow"
	ListKind = "TraceflowList"
	Resource = "traceflows"
)

// GroupVersionResource is the Traceflow resource for the dynamic client.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// APIVersion is the apiVersion field of a Traceflow.
const APIVersion = Group + "/" + Version

// Timeout bounds, in seconds, as Antrea enforces them.
const (
	MinTimeoutSeconds     = 1
	MaxTimeoutSeconds     = 300
	DefaultTimeoutSeconds = 20
)

// IP protocol numbers used in ipHeader.protocol and ipv6Header.nextHeader.
const (
	ProtocolICMP   int32 = 1
	ProtocolTCP    int32 = 6
	ProtocolUDP    int32 = 17
	ProtocolICMPv6 int32 = 58
)

// Traceflow is a crd.antrea.io/v1beta1 Traceflow (cluster-scoped).
type Traceflow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec Spec `json:"spec,omitempty"`
	// Status is omitted while empty (omitzero) so that a record printed
	// before it ran has no misleading "status: {}".
	Status Status `json:"status,omitzero"`
}

// Spec says what to trace.
type Spec struct {
	Source      Source      `json:"source,omitempty"`
	Destination Destination `json:"destination,omitempty"`
	Packet      Packet      `json:"packet,omitempty"`
	// LiveTraffic traces the first packet of real traffic matching the
	// packet spec instead of injecting one.
	LiveTraffic bool `json:"liveTraffic,omitempty"`
	// DroppedOnly, with LiveTraffic, captures only a dropped packet.
	DroppedOnly bool `json:"droppedOnly,omitempty"`
	// Timeout is in seconds, 1 to 300; Antrea's default is 20.
	Timeout int32 `json:"timeout,omitempty"`
}

// Source is where the packet starts: a pod (or, for live traffic in
// Antrea, an IP).
type Source struct {
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// Destination is where the packet goes: a pod, a Service or an IP.
type Destination struct {
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Service   string `json:"service,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// Packet is the probe's headers. Exactly one of IPHeader and IPv6Header is
// set in a spec we build.
type Packet struct {
	SrcIP string `json:"srcIP,omitempty"`
	DstIP string `json:"dstIP,omitempty"`
	// Length is the IP packet length, IP header included.
	Length          int32           `json:"length,omitempty"`
	IPHeader        *IPHeader       `json:"ipHeader,omitempty"`
	IPv6Header      *IPv6Header     `json:"ipv6Header,omitempty"`
	TransportHeader TransportHeader `json:"transportHeader,omitempty"`
}

// IPHeader is the IPv4 header of the probe.
type IPHeader struct {
	Protocol int32 `json:"protocol,omitempty"`
	TTL      int32 `json:"ttl,omitempty"`
	Flags    int32 `json:"flags,omitempty"`
}

// IPv6Header is the IPv6 header of the probe.
type IPv6Header struct {
	// NextHeader is a pointer because 0 (hop-by-hop options) is a valid value.
	NextHeader *int32 `json:"nextHeader,omitempty"`
	HopLimit   int32  `json:"hopLimit,omitempty"`
}

// TransportHeader holds exactly one of ICMP, UDP and TCP.
type TransportHeader struct {
	ICMP *ICMPEchoRequestHeader `json:"icmp,omitempty"`
	UDP  *UDPHeader             `json:"udp,omitempty"`
	TCP  *TCPHeader             `json:"tcp,omitempty"`
}

// ICMPEchoRequestHeader is an ICMP (or ICMPv6) echo request.
type ICMPEchoRequestHeader struct {
	ID       int32 `json:"id,omitempty"`
	Sequence int32 `json:"sequence,omitempty"`
}

// UDPHeader is the UDP header of the probe.
type UDPHeader struct {
	SrcPort int32 `json:"srcPort,omitempty"`
	DstPort int32 `json:"dstPort,omitempty"`
}

// TCPHeader is the TCP header of the probe.
type TCPHeader struct {
	SrcPort int32 `json:"srcPort,omitempty"`
	DstPort int32 `json:"dstPort,omitempty"`
	// Flags is a pointer because 0 (no flags) differs from unset (SYN).
	Flags *int32 `json:"flags,omitempty"`
}

// Phase is the phase of a Traceflow.
type Phase string

// Phases, as Antrea names them.
const (
	PhasePending   Phase = "Pending"
	PhaseRunning   Phase = "Running"
	PhaseSucceeded Phase = "Succeeded"
	PhaseFailed    Phase = "Failed"
)

// Status is what the engine found.
type Status struct {
	Phase  Phase  `json:"phase,omitempty"`
	Reason string `json:"reason,omitempty"`
	// StartTime is a pointer so that an unset time is omitted rather than
	// serialized as null, which older API servers reject.
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// DataplaneTag identifies the trace's packet across nodes (a DSCP value).
	DataplaneTag int8 `json:"dataplaneTag,omitempty"`
	// Results are per node, in the shape the node helper reports them.
	Results []report.NodeResult `json:"results,omitempty"`
	// CapturedPacket is the packet a live-traffic trace captured.
	CapturedPacket *Packet `json:"capturedPacket,omitempty"`
}

// List is a list of Traceflows (a TraceflowList).
type List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Traceflow `json:"items"`
}
