package outcome

import (
	"fmt"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// ReplyFate is what came back to the source of a round trip, once its
// probe reached the destination.
type ReplyFate string

// Reply fates: the record's traceflow.kubectl-traceflow.io/reply.
const (
	// Answered: the destination's answer (a SYN-ACK, an echo reply, a UDP
	// answer) came back to the source.
	Answered ReplyFate = "Answered"
	// Refused: the answer that came back says no (a RST, an ICMP error).
	Refused ReplyFate = "Refused"
	// Lost: an answer left the destination and did not reach the source.
	Lost ReplyFate = "Lost"
	// Unanswered: the probe was delivered and no answer was seen within
	// the timeout.
	Unanswered ReplyFate = "Unanswered"
)

// ReplyEnd is how the answer's way back ended.
type ReplyEnd struct {
	Fate ReplyFate
	// Answer names the answer ("SYN-ACK", "RST", ...), where one was seen.
	Answer string
	// Reason says where, in words.
	Reason string
	// Decided is the answer's hop that decided the fate, if one did.
	Decided *Hop
}

// Expectations that only a round trip can meet.
const (
	// ExpectRefused: the probe reached its destination, which answered no.
	ExpectRefused Expect = "refused"
)

// RoundTripExitCode is ExitCode for a trace that may have followed the
// answer: with a reply, a probe that reached its destination passes
// --expect delivered only if it was answered, and --expect refused only if
// the answer refused it. Without one it is ExitCode.
func RoundTripExitCode(v Verdict, reply *ReplyEnd, want Expect, dst DestinationKind) (exitcode.Code, error) {
	if want == ExpectRefused {
		if reply != nil && reply.Fate == Refused {
			return exitcode.OK, nil
		}
		if code, err := ExitCode(v, ExpectAny, dst); code != exitcode.OK {
			return code, err
		}
		if reply == nil {
			return exitcode.Verdict, fmt.Errorf("packet %s, expected refused: no answer was followed (only a round trip that reached the destination can be refused)", v)
		}
		return exitcode.Verdict, fmt.Errorf("answer %s, expected refused: %s", reply.Fate, reply.Reason)
	}
	code, err := ExitCode(v, want, dst)
	if code != exitcode.OK || reply == nil || (want != "" && want != ExpectDelivered) {
		return code, err
	}
	if reply.Fate == Answered {
		return exitcode.OK, nil
	}
	return exitcode.Verdict, fmt.Errorf("packet %s but the answer %s, expected answered: %s", v, reply.Fate, reply.Reason)
}
