package tagalloc

import (
	"context"
	"errors"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
)

// A run that keeps its claims (Local.Keep) holds each claimed DSCP value
// for itself from the claim to Close, renewing its Lease, and gives it to
// up to dscp.ECNVariants of its traces at once, each with an ECN codepoint
// of its own (dscp.Tag): tags 9, 64+9 and 128+9 under the one Lease of 9.
// No other plugin carries a DSCP value the run holds, so the run's traces
// are the only ones the ECN codepoint must tell apart, and they all run
// helpers of this version, whose flows match it. A run of 8 traces at
// once then holds 3 of the pool's 14 Leases, and its concurrency is
// bounded by 42 tags, not 14.

// heldClaim is a DSCP value's claim that the run keeps: the run renews it,
// and used says which of its ECN variants a trace of the run carries.
type heldClaim struct {
	c    *Claim
	stop context.CancelFunc
	used [dscp.ECNVariants]bool
}

// inUse reports whether a trace carries one of h's variants.
func (h *heldClaim) inUse() bool {
	for _, u := range h.used {
		if u {
			return true
		}
	}
	return false
}

// variant hands out a free ECN variant of a claim the run keeps, one not
// in inUse, or nil. Within a DSCP value the run holds, only the run's own
// traces carry tags, so inUse names the one tag to skip (a round trip's
// probe, claiming its answer's), not the whole value as it does for values
// the run does not hold (another engine's flows match the DSCP value
// alone). A claim whose renewal found it no longer the run's (its Lease
// deleted or taken over) gives none, and goes once no trace carries it,
// its DSCP value free to be claimed again through the API.
func (l *Local) variant(inUse map[uint8]bool) *Claim {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < len(l.held); i++ {
		h := l.held[i]
		if h.c.lost.Load() {
			if !h.inUse() {
				l.drop(i)
				i--
			}
			continue
		}
		d := dscp.Value(h.c.Tag)
		for e := range uint8(dscp.ECNVariants) {
			if tag := dscp.Tag(d, e); !h.used[e] && !inUse[tag] {
				h.used[e] = true
				return h.share(tag, l)
			}
		}
	}
	return nil
}

// share is the claim of one of h's variants that a trace carries: its
// Release gives the variant back to the run, and its Hold does nothing
// (the run renews the Lease).
func (h *heldClaim) share(tag uint8, l *Local) *Claim {
	return &Claim{Tag: tag, Holder: h.c.Holder, name: h.c.name, uid: h.c.uid, owner: h.c.owner, local: l, held: h}
}

// drop forgets the held claim at i and stops its renewal; l.mu is held.
func (l *Local) drop(i int) {
	h := l.held[i]
	h.stop()
	delete(l.busy, dscp.Value(h.c.Tag))
	l.held = append(l.held[:i], l.held[i+1:]...)
}

// adopt makes c, just claimed, a claim the run keeps and returns the
// claim of its first variant, or nil where l keeps nothing (then c is the
// trace's alone, as without Keep).
func (l *Local) adopt(c *Claim) *Claim {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keepAs == "" || l.life == nil || l.life.Err() != nil {
		return nil
	}
	ctx, stop := context.WithCancel(l.life)
	c.renewEvery = l.renewEvery
	h := &heldClaim{c: c, stop: stop}
	h.used[0] = true
	l.held = append(l.held, h)
	go c.Hold(ctx, time.Now)
	return h.share(c.Tag, l)
}

// giveBack ends a trace's use of v's variant. Where the run no longer
// keeps claims (Close, its context ended) or the claim is lost, a claim
// that no trace carries any more is released.
func (l *Local) giveBack(ctx context.Context, v *Claim) error {
	h := v.held
	l.mu.Lock()
	h.used[dscp.ECN(v.Tag)] = false
	release := !h.inUse() && (l.keepAs == "" || l.life == nil || l.life.Err() != nil || h.c.lost.Load())
	if release {
		for i := range l.held {
			if l.held[i] == h {
				l.drop(i)
				break
			}
		}
	}
	l.mu.Unlock()
	if !release || h.c.lost.Load() {
		return nil
	}
	defer l.freed(h.c.Tag)
	return h.c.remove(ctx)
}

// Close releases every claim l keeps and keeps no more: a claim that a
// trace still carries is released with that trace's Release. Run it once
// the run's traces have ended.
func (l *Local) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	l.keepAs = ""
	l.mu.Unlock()
	return l.releaseIdle(ctx)
}

// Yield deletes the claims l keeps that no trace carries, and goes on
// keeping those it claims later. A run that waits for tags calls it
// first: a round trip takes two, and a run sitting on one it cannot use
// alone would keep another run, waiting the same way, from ever having
// two.
func (l *Local) Yield(ctx context.Context) error {
	if l == nil {
		return nil
	}
	return l.releaseIdle(ctx)
}

// releaseIdle deletes the Leases of the claims l keeps that no trace
// carries.
func (l *Local) releaseIdle(ctx context.Context) error {
	l.mu.Lock()
	var idle []*heldClaim
	for i := 0; i < len(l.held); i++ {
		if h := l.held[i]; !h.inUse() {
			idle = append(idle, h)
			h.stop()
			l.held = append(l.held[:i], l.held[i+1:]...)
			i--
		}
	}
	l.mu.Unlock()
	var errs []error
	for _, h := range idle {
		errs = append(errs, h.c.remove(ctx))
		l.freed(h.c.Tag)
	}
	return errors.Join(errs...)
}
