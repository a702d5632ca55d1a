package tracer

import "github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"

// answerCatchPriority is the answers' catch flows' priority in table 0:
// above every CNI's flows, one below the probe's own catches and
// continuations (65535), so that OVS's overlap check (FlagCheckOverlap)
// meets only other answers' catches. The traces of one helper process
// share out what their catches match beforehand (catchkeys.go); a trace
// of another process (a one-shot helper, another run's serve helper)
// catching the same answers at the same time is found so: OVS refuses
// the second catch instead of letting it replace the first, whose trace
// would then have lost its answer, and the second trace says what it
// could not catch. (Traces of one run or of two runs at once carry
// different tags, so their catches differ by their register bit; two
// helpers run by hand with the same tag would still replace each other's.)
const answerCatchPriority = 0xfffe

// refusedCatch records the kind of answer a catch flow OVS refused as
// overlapping another process's would have caught.
func (s *session) refusedCatch(m []byte) {
	class := "answer"
	if fields, err := openflow.FlowModMatch(m); err == nil {
		class = catchClassOf(fields)
	}
	s.catches.missedClass(class)
	s.c.Logf("a trace of another helper process catches answers (%s) to the same source: OVS refused this trace's catch as overlapping it, so this trace cannot catch them", class)
}

// catchClassOf is the kind of answer (catchKey.class) a catch flow's match
// catches.
func catchClassOf(fields []openflow.OXMField) string {
	k := catchKey{}
	for _, f := range fields {
		if f.Class != 0x8000 || len(f.Value) == 0 {
			continue
		}
		switch f.Field {
		case 10: // ip_proto
			k.proto = f.Value[0]
		case 19, 29: // icmpv4_type, icmpv6_type
			k.num = uint16(f.Value[0])
		}
	}
	return k.class()
}
