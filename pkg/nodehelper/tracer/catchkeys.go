package tracer

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// The answers' catch flows of the traces running at once in one process
// (a serve helper's, which runs every trace of a run on its node).
//
// An answer carries nothing of its trace (reply.go): its catch matches
// the probe's source address and port (TCP, UDP), or only the address
// (an echo reply, an ICMP error: OpenFlow matches neither the echo's
// identifier nor the header an error quotes). Two traces from one source
// so install the same flow where their probes share a source port, and
// always for echo replies and ICMP errors: the second replaces the first
// (same match, same priority), takes its answers, lets them go as not its
// own, and deletes the flow when it ends. The first trace then reports
// its answer lost or unanswered, though it came back (measured: 5 to 6 of
// 8 round trips from one source at once in three runs of
// TestIntegrationRoundTripsFromOneSourceAtOnce; one cell in about 1,500 of
// a 420-cell matrix in ovn mode).
//
// So a trace holds what its catch flows match before installing them:
// the sender picks a source port nobody holds, and waits for the keys an
// answer to its protocol needs (an echo reply and ICMP errors for a ping,
// ICMP errors for UDP); a key another trace holds is otherwise not caught,
// and the answer's trace says so where it caught nothing (Uncaught): it
// cannot know whether the answer passed.
//
// Traces in other processes (one-shot helpers, another run's serve
// helpers) are not seen here: their probes' random source ports make a
// collision unlikely (see probeSpec), not impossible.

// catchKey is what one catch flow matches, as far as two catch flows can
// replace or shadow each other.
type catchKey struct {
	// ovs is the OVS and bridge the flow goes into.
	ovs string
	v6  bool
	// proto is the IP protocol; num the ICMP type, or for TCP and UDP the
	// port the answer goes to.
	proto uint8
	num   uint16
	// dst is the address the answer goes to; invalid: any address.
	dst netip.Addr
}

func (k catchKey) collides(o catchKey) bool {
	return k.ovs == o.ovs && k.v6 == o.v6 && k.proto == o.proto && k.num == o.num &&
		(!k.dst.IsValid() || !o.dst.IsValid() || k.dst == o.dst)
}

// class is the kind of answer the key's flow catches, as report.Answer's
// Class names it.
func (k catchKey) class() string {
	switch k.proto {
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	}
	if k.num == 0 || k.num == 129 {
		return "echo reply"
	}
	return "ICMP error"
}

type catchHold struct {
	key catchKey
	// owner is the answer's tag: one trace's sessions (a sender and a
	// receiver on the same node) share their keys, as they share it.
	owner uint8
}

// catchKeys is the process's held keys and the waiters for them.
type catchKeys struct {
	mu      sync.Mutex
	held    []catchHold
	waiting []catchHold
	// freed is closed, and replaced, whenever a key is let go.
	freed chan struct{}
}

var liveCatches = &catchKeys{freed: make(chan struct{})}

// takenLocked reports whether another owner holds or waits for a key that
// collides with k.
func (c *catchKeys) takenLocked(k catchKey, owner uint8, waitersToo bool) bool {
	for _, h := range c.held {
		if h.owner != owner && h.key.collides(k) {
			return true
		}
	}
	if waitersToo {
		for _, h := range c.waiting {
			if h.owner != owner && h.key.collides(k) {
				return true
			}
		}
	}
	return false
}

// try takes each of keys that the owner holds already, or no other owner
// holds or waits for, and returns the ones it took.
func (c *catchKeys) try(owner uint8, keys []catchKey) []catchKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	var got []catchKey
	for _, k := range keys {
		if slices.Contains(c.held, catchHold{k, owner}) || !c.takenLocked(k, owner, true) {
			c.held = append(c.held, catchHold{k, owner})
			got = append(got, k)
		}
	}
	return got
}

// wait takes all of keys once no other owner holds any of them, or
// returns ctx's error. While it waits, try takes none of them from it.
func (c *catchKeys) wait(ctx context.Context, owner uint8, keys []catchKey) error {
	c.mu.Lock()
	for _, k := range keys {
		c.waiting = append(c.waiting, catchHold{k, owner})
	}
	for {
		free := true
		for _, k := range keys {
			free = free && !c.takenLocked(k, owner, false)
		}
		if free {
			for _, k := range keys {
				c.held = append(c.held, catchHold{k, owner})
			}
		}
		if free || ctx.Err() != nil {
			c.waiting = removeHolds(c.waiting, owner, keys)
			c.mu.Unlock()
			if free {
				return nil
			}
			return ctx.Err()
		}
		freed := c.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
		}
		c.mu.Lock()
	}
}

// release lets go of keys the owner took (once each).
func (c *catchKeys) release(owner uint8, keys []catchKey) {
	if len(keys) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = removeHolds(c.held, owner, keys)
	close(c.freed)
	c.freed = make(chan struct{})
}

// removeHolds removes one hold of each key by owner.
func removeHolds(hs []catchHold, owner uint8, keys []catchKey) []catchHold {
	for _, k := range keys {
		for i, h := range hs {
			if h.owner == owner && h.key == k {
				hs = append(hs[:i], hs[i+1:]...)
				break
			}
		}
	}
	return hs
}

// heldCatches is what one session took of the process's catch keys, and
// the kinds of answer it could not catch.
type heldCatches struct {
	mu       sync.Mutex
	owner    uint8
	keys     []catchKey
	uncaught []string
}

func (h *heldCatches) took(owner uint8, keys []catchKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.owner = owner
	h.keys = append(h.keys, keys...)
}

// missed records the kinds of answer (catchKey.class) of keys it could
// not take.
func (h *heldCatches) missed(keys []catchKey) {
	for _, c := range classes(keys) {
		h.missedClass(c)
	}
}

// missedClass records a kind of answer it could not catch.
func (h *heldCatches) missedClass(class string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Contains(h.uncaught, class) {
		h.uncaught = append(h.uncaught, class)
	}
}

// missing is the kinds of answer the trace could not catch.
func (h *heldCatches) missing() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.uncaught)
}

func (h *heldCatches) release() {
	h.mu.Lock()
	keys := h.keys
	h.keys = nil
	h.mu.Unlock()
	liveCatches.release(h.owner, keys)
}

// ovsKey names the OVS and bridge a session's flows go into, for its
// catch keys.
func (s *session) ovsKey() string { return s.c.Rundir + "\x00" + s.c.Bridge }

// maxKeyWait bounds how long a sender waits for another trace's catch keys.
// A trace lets its keys go when it ends, once its answer has been followed
// to the source (not when the answer is caught: the answer goes through
// table 0 again, retagged, where a catch flow of the same match would take
// it again). That is a round trip and a few flow changes after its probe
// went; a trace that holds them longer waits for an answer that may never
// come (a UDP port that does not answer, an answer lost on the way) and
// holds them for its whole timeout: a ping waiting that long from the same
// pod would end incomplete, its receiver on the other node given up (seen
// on the genuine Antrea). Past the bound the sender goes on with the keys
// that are free, and says which kinds of answer it could not catch. (A
// variable only so that a test of something else can lift the bound.)
var maxKeyWait = 2 * time.Second

// keyWait is how long a trace with the given timeout waits for catch keys:
// maxKeyWait, at most half its timeout.
func keyWait(timeout time.Duration) time.Duration { return min(maxKeyWait, timeout/2) }

// takeCatches takes the keys of a catch plan's flows (keyed as answerCatch
// returns them), waiting first (at most keyWait) for the ones
// whose class is in waitFor, and returns the plan without the flows whose
// key another trace holds, which it records as missed.
func (s *session) takeCatches(ctx context.Context, p Plan, keys []catchKey, waitFor ...string) Plan {
	owner := s.c.Tag
	var must []catchKey
	for _, k := range keys {
		if slices.Contains(waitFor, k.class()) {
			must = append(must, k)
		}
	}
	if len(must) > 0 {
		bound := keyWait(s.c.Timeout)
		wctx, cancel := context.WithTimeout(ctx, bound)
		err := liveCatches.wait(wctx, owner, must)
		cancel()
		if err == nil {
			s.catches.took(owner, must)
		} else {
			s.c.Logf("waited %s for another trace from the same source to stop catching its answers: catching what is free", bound)
			must = nil
		}
	}
	var rest []catchKey
	for _, k := range keys {
		if !slices.Contains(must, k) {
			rest = append(rest, k)
		}
	}
	got := liveCatches.try(owner, rest)
	s.catches.took(owner, got)
	var kept Plan
	var missed []catchKey
	for i, k := range keys {
		if slices.Contains(must, k) || slices.Contains(got, k) {
			kept.FlowMods = append(kept.FlowMods, p.FlowMods[i])
		} else {
			missed = append(missed, k)
		}
	}
	if len(missed) > 0 {
		s.catches.missed(missed)
		s.c.Logf("another trace from the same source catches its answers too (%v): this trace cannot catch them", classes(missed))
	}
	return kept
}

func classes(keys []catchKey) []string {
	var out []string
	for _, k := range keys {
		if !slices.Contains(out, k.class()) {
			out = append(out, k.class())
		}
	}
	return out
}
