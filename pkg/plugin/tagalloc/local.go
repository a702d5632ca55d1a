package tagalloc

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Local is the set of tags that allocators sharing it hold or are
// claiming. Without it, a run of many traces at once asks the API server
// about its own tags again and again: each such try is a create refused,
// a read of the Lease and a read of the server's clock, only to learn
// that the tag is taken. A tag the run holds is taken by definition; one
// that it does not hold is still claimed through the API server, the
// only judge of what other plugins hold.
//
// A Local that keeps claims (Keep) goes further: a claim its trace
// releases stays the run's, renewed by the run, and the run's next trace
// takes it without an API call. A run of 420 traces on shared helpers
// then claims a few tags once instead of creating and deleting a Lease per
// trace and per answer. Its claims are under the run's name, so that
// `kubectl traceflow cleanup --trace RUN` (what a second Ctrl-C runs)
// finds them; Close releases them when the run ends.
type Local struct {
	mu   sync.Mutex
	busy map[uint8]bool
	// keepAs, where set, is the name the run's claims are made under, and
	// says that released claims are kept (idle) rather than deleted.
	keepAs string
	life   context.Context
	// held is what the run keeps (kept.go).
	held []*heldClaim
	// exhaustedAt is when a claim of the run last asked about every tag
	// the run does not hold and found each another plugin's; until
	// ExhaustedFor after it, a claim fails so without asking again.
	exhaustedAt time.Time
	// clock is time.Now where nil (a test's own otherwise).
	clock func() time.Time
	// renewEvery is the kept claims' renewal period (Hold's default where
	// zero; a test's own otherwise).
	renewEvery time.Duration
}

// ExhaustedFor is how long a run that found the pool taken by other
// plugins believes it without asking again. Each asking costs two
// requests per tag the run does not hold: a 420-cell matrix beside another
// made 3,200 to 4,300 requests, most of them such askings. It is shorter
// than the wait of a trace starved of tags (check.TagPoll), whose run
// deletes its idle claims first (Yield, which forgets the finding too).
const ExhaustedFor = 500 * time.Millisecond

// NewLocal returns an empty set.
func NewLocal() *Local { return &Local{busy: map[uint8]bool{}} }

// Keep makes l keep the claims its traces release, under the name run,
// renewing them until Close or until ctx ends (after which a released
// claim is deleted as without Keep). A nil Local keeps nothing.
func (l *Local) Keep(ctx context.Context, run string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keepAs, l.life = run, ctx
}

// holder is the name a claim for trace is made under: the run's, where l
// keeps its claims.
func (l *Local) holder(trace string) string {
	if l == nil {
		return trace
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keepAs != "" {
		return l.keepAs
	}
	return trace
}

// take marks tag as the caller's to try, or reports false if another
// allocator of the run holds or is trying it. A nil Local takes every tag.
func (l *Local) take(tag uint8) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy[tag] {
		return false
	}
	l.busy[tag] = true
	return true
}

func (l *Local) now() time.Time {
	if l.clock != nil {
		return l.clock()
	}
	return time.Now()
}

// recentlyExhausted reports whether a claim of the run found every tag
// taken less than ExhaustedFor ago. A nil Local remembers nothing.
func (l *Local) recentlyExhausted() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.exhaustedAt.IsZero() && l.now().Sub(l.exhaustedAt) < ExhaustedFor
}

// sawExhausted records that a claim of the run asked and found every tag
// taken.
func (l *Local) sawExhausted() {
	l.locked(func() { l.exhaustedAt = l.now() })
}

// freed gives back a tag whose Lease the run deleted (a release without
// Keep, Yield): it is free now, whatever the run last found.
func (l *Local) freed(tag uint8) {
	l.locked(func() {
		delete(l.busy, tag)
		l.exhaustedAt = time.Time{}
	})
}

// put gives tag back to the run.
func (l *Local) put(tag uint8) {
	l.locked(func() { delete(l.busy, tag) })
}

// locked runs f under l's lock; a nil Local runs nothing.
func (l *Local) locked(f func()) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// remove deletes c's Lease if it is still c's (same UID).
func (c *Claim) remove(ctx context.Context) error {
	uid := c.uid
	err := c.owner.Delete(ctx, c.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("release dataplane tag %d: %w", c.Tag, err)
	}
	return nil
}
