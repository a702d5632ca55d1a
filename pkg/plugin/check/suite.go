package check

// A suite file of `kubectl traceflow check` is a versioned list of named
// trace cases, each with its source, destination, packet and expectation.
// Parsing is pure (no cluster) and keeps the line of every field, so that
// an error names the file, the line and the field; the schema is
// documented in check-suite.schema.json.

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// The version and kind a suite file declares.
const (
	APIVersion = "traceflow.kubectl-traceflow.io/v1alpha1"
	Kind       = "CheckSuite"
)

// Suite is one file's cases, defaults applied.
type Suite struct {
	File  string
	Cases []Case
}

// Pos is where something was written: a file and a 1-based line.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string {
	if p.File == "" {
		return "the command line" // a case made from flags (--all-endpoints)
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// Pick says which pods of a selector a source stands for.
type Pick string

// Picks.
const (
	// PickFirst is the first Ready pod, by name.
	PickFirst Pick = "first"
	// PickAll is every Ready pod: one trace from each.
	PickAll Pick = "all"
)

// From is a case's source: exactly one of a pod by name, pods by label
// selector, a node (its own traffic, as `kubectl traceflow node/NAME DST`
// sends it) and an address outside the cluster (as `kubectl traceflow
// ADDR DST --via node/NAME` sends it).
type From struct {
	// Namespace is the pod's or the selector's; "" for a node or an IP.
	Namespace string
	Pod       string
	Selector  string
	Pick      Pick
	Node      string
	IP        string
	// Via, with IP, is the node whose uplink receives the packet; "" for
	// the destination node's own (a NodePort), which resolution checks.
	Via string
	// At is where from: was written; SelectorAt where its selector was,
	// ViaAt where its via was.
	At, SelectorAt, ViaAt Pos
}

// To is a case's destination: exactly one of Pod, Selector (the first
// Ready pod by name), Service, IP and Node (the node's address).
type To struct {
	Namespace string
	Pod       string
	Selector  string
	Service   string
	IP        string
	Node      string
	// AllEndpoints, for a Service, adds one trace to each endpoint (its IP
	// and target port) to the one through the Service.
	AllEndpoints bool
	At           Pos
	// SelectorAt, ServiceAt say where the selector or Service was written.
	SelectorAt, ServiceAt Pos
}

// Case is one named expectation.
type Case struct {
	Name string
	// Path is where the case is in its file, as errors name it: cases[3].
	Path     string
	At       Pos
	From     From
	To       To
	Protocol traceflow.Protocol
	// Port is 0 for ICMP, and for a Service whose first port is meant.
	Port    int32
	PortAt  Pos
	Expect  outcome.Expect
	Timeout time.Duration
	// RoundTrip follows the destination's answer back to the source too
	// (the helper engine's round trip): with it, delivered means answered,
	// and refused can be expected. RoundTripAt is where it was written.
	RoundTrip   bool
	RoundTripAt Pos
}

// OneWayOnly returns an error naming the first case of suites that follows
// the answer, for a run that can follow the probe only: why says why and
// what to do. It returns nil when every case is one way.
func OneWayOnly(suites []*Suite, why string) error {
	for _, s := range suites {
		for _, c := range s.Cases {
			if c.RoundTrip {
				e := Errorf(c.RoundTripAt, strings.TrimPrefix(c.Path+".roundTrip", "."), "%s", why)
				e.Case = c.Name
				return e
			}
		}
	}
	return nil
}

// PodSourcesOnly returns an error naming the first case of suites whose
// source is no pod (a node, or an address outside the cluster), for a run
// whose engine starts a probe only at a pod's own port: why says why and
// what to do. It returns nil when every source is a pod.
func PodSourcesOnly(suites []*Suite, why string) error {
	for _, s := range suites {
		for _, c := range s.Cases {
			field := "from.node"
			if c.From.IP != "" {
				field = "from.ip"
			}
			if c.From.Node != "" || c.From.IP != "" {
				e := Errorf(c.From.At, strings.TrimPrefix(c.Path+"."+field, "."), "%s", why)
				e.Case = c.Name
				return e
			}
		}
	}
	return nil
}

// Error is a problem in a suite file: where, which field, and what.
type Error struct {
	At    Pos
	Field string
	// Case is the name of the case the field belongs to, if known.
	Case string
	Msg  string
}

func (e *Error) Error() string {
	field := e.Field
	if e.Case != "" {
		field = strings.TrimSpace(field + fmt.Sprintf(" (case %q)", e.Case))
	}
	if field == "" {
		return fmt.Sprintf("%s: %s", e.At, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.At, field, e.Msg)
}

// Errorf makes an Error.
func Errorf(at Pos, field, format string, a ...any) *Error {
	return &Error{At: at, Field: field, Msg: fmt.Sprintf(format, a...)}
}
