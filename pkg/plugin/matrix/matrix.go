// Package matrix is the pure side of `kubectl traceflow matrix`: the cells
// of a namespace's connectivity matrix (every source pod × destination pod ×
// port), the state a trace leaves each cell in, the grid that shows them,
// and the expected-matrix file a run is compared with so that CI sees a
// change. Nothing here talks to the cluster: the command traces the cells
// and hands the states over.
package matrix

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/termsafe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Port is one destination port of the matrix.
type Port struct {
	Protocol traceflow.Protocol
	// Number is 0 for ICMP, which has no port.
	Number int32
}

// String writes the port as ParsePort reads it back: "tcp/80", "udp/53",
// "icmp".
func (p Port) String() string {
	if p.Protocol == traceflow.ICMP {
		return "icmp"
	}
	return strings.ToLower(string(p.Protocol)) + "/" + strconv.Itoa(int(p.Number))
}

// portForms is what every ParsePort error ends with, so that a mistyped
// flag value or file field shows how to write it.
const portForms = "give tcp/N or udp/N with N 1-65535, icmp, or N alone for tcp/N"

// ParsePort reads a port as a flag value or the expected-matrix file
// writes it: "tcp/80", "udp/53", "icmp", or "80" for tcp/80. The protocol
// is read in any case ("TCP/80"), as check reads protocols.
func ParsePort(s string) (Port, error) {
	if s == "" {
		return Port{}, fmt.Errorf("an empty port: %s", portForms)
	}
	proto, num, slash := strings.Cut(s, "/")
	if !slash {
		if strings.EqualFold(s, "icmp") {
			return Port{Protocol: traceflow.ICMP}, nil
		}
		proto, num = "tcp", s
	}
	var p Port
	switch strings.ToLower(proto) {
	case "tcp":
		p.Protocol = traceflow.TCP
	case "udp":
		p.Protocol = traceflow.UDP
	case "icmp":
		return Port{}, fmt.Errorf("%q is not a port: icmp takes no port number; %s", s, portForms)
	default:
		return Port{}, fmt.Errorf("%q is not a port: %q is not a protocol here; %s", s, proto, portForms)
	}
	// ParseUint, unlike Atoi, takes no sign: "+80" is not a port.
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil || n == 0 {
		if strings.Trim(num, "0123456789") == "" && num != "" {
			return Port{}, fmt.Errorf("%q is not a port: %s is out of range; %s", s, num, portForms)
		}
		return Port{}, fmt.Errorf("%q is not a port: %s", s, portForms)
	}
	p.Number = int32(n) // ParseUint kept it within 16 bits
	return p, nil
}

// Cell names one cell: a trace from one pod to another (both of the
// matrix's namespace) on one port.
type Cell struct {
	From, To string
	Port     Port
}

// String names the cell for a terminal, "client-a → web-1 tcp/80"; pod
// names from the cluster are escaped, as every name printed is.
func (c Cell) String() string {
	return termsafe.Escape(c.From, termsafe.Name) + " → " + termsafe.Escape(c.To, termsafe.Name) + " " + c.Port.String()
}

// State is where a cell stands: not traced yet, being traced, or how its
// trace ended.
type State int

// States. The zero value is Pending, so that a cell missing from a map of
// states reads as not traced.
const (
	Pending State = iota
	Running
	Delivered
	Dropped
	Refused
	Incomplete
)

// stateNames are the words of String, which the expected file uses.
var stateNames = [...]string{"pending", "running", "delivered", "dropped", "refused", "incomplete"}

// Symbol is the one-column mark the grid shows for the state.
func (s State) Symbol() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "?"
	}
	return [...]string{"·", "…", "✓", "✗", "↩", "?"}[s]
}

// String is the state's word, as the expected file writes it.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "State(" + strconv.Itoa(int(s)) + ")"
	}
	return stateNames[s]
}

// final reports whether the state is how a trace ended, the states an
// expected file can hold.
func (s State) final() bool { return s >= Delivered && s <= Incomplete }

// StateOf maps how a trace ended to its cell's state. reply is the
// answer's way back for a round trip, nil for a one-way trace.
func StateOf(v outcome.Verdict, reply *outcome.ReplyEnd) State {
	switch v {
	case outcome.Delivered:
		if reply == nil {
			return Delivered
		}
		switch reply.Fate {
		case outcome.Answered:
			return Delivered
		case outcome.Refused:
			return Refused
		case outcome.Lost, outcome.Unanswered:
			// The probe arrived but its answer did not come back: to
			// the client the connection fails as if the probe had
			// been dropped.
			return Dropped
		}
		// No fate: the helpers could not follow the answer, so whether
		// the round trip works is unknown, as RoundTripExitCode does not
		// pass it as delivered either.
		return Incomplete
	case outcome.Dropped:
		return Dropped
	case outcome.Rejected:
		// A REJECT rule answers the probe with a TCP RST or an ICMP
		// unreachable, which the client sees as a refusal (curl's
		// "connection refused"), not as a silent drop.
		return Refused
	case outcome.ForwardedOutOfNetwork:
		// Both ends of a cell are pods of the pod network: a probe that
		// leaves the network never reached its destination, and where
		// it went is not a verdict of this matrix.
		return Incomplete
	}
	// Incomplete, Failed, "" and any verdict this version does not know.
	return Incomplete
}
