package outcome

// Ended is how a trace ended, whichever engine ran it: the one value the
// trace runner returns and every caller (the trace command, check) reads.
type Ended struct {
	Verdict Verdict
	// Reason says why, in the engine's words, where the verdict needs one.
	Reason string
	// Destination is what the destination is; the exit code depends on it.
	Destination DestinationKind
	// Decided is the hop that decided the verdict (nil for Incomplete and
	// Failed).
	Decided *Hop
	// Reply is what came back to the source, for a round trip whose probe
	// reached its destination; nil otherwise.
	Reply *ReplyEnd
}

// Started reports whether the trace got as far as an engine: an Ended
// without a verdict is a trace that never started.
func (e Ended) Started() bool { return e.Verdict != "" }
