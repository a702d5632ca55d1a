package tracer

import (
	"context"
	"math/rand/v2"
	"sync"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// A serve helper's traces hear of their removed flows through one
// connection per bridge (removals), not each through its own.
//
// Every flow of a trace asks OVS to say when it is removed (restore.go),
// and OVS says so to every OpenFlow connection of the bridge: with eight
// traces at once on a node, each flow a trace deleted was told eight
// times, to connections that drop what is not theirs. In a 420-cell
// matrix in lab mode that was 128,558 messages from one node's OVS (its
// coverage counter vconn_sent; 21,000 without them), and OVS's and the
// helpers' time to write and read them. So a trace of a serve helper turns
// flow-removed messages off on its own connection, and the helper's one
// connection per bridge that keeps them on hands each to the trace whose
// cookie it carries.

// removals is the connection that hears a bridge's flow removals for the
// traces of one process.
type removals struct {
	of   *openflow.Session
	mu   sync.Mutex
	subs map[uint64]chan openflow.FlowRemoved // by trace cookie
}

func watchRemovals(ctx context.Context, mgmt string, logf func(string, ...any)) (*removals, error) {
	// A controller id above the traces' (1..0x7fff, dial) and clear of 0,
	// where CNIs' own packet-ins go: no packet-in comes here.
	of, err := openflow.Dial(ctx, mgmt, uint16(0x8000+rand.IntN(0x7fff)), logf) //nolint:gosec // not a secret
	if err != nil {
		return nil, err
	}
	r := &removals{of: of, subs: map[uint64]chan openflow.FlowRemoved{}}
	go r.run()
	return r, nil
}

func (r *removals) run() {
	for {
		select {
		case fr := <-r.of.FlowRemoved():
			r.mu.Lock()
			ch := r.subs[fr.Cookie&cookieMask]
			r.mu.Unlock()
			if ch != nil {
				select {
				case ch <- fr:
				default:
					// More removals of one trace's flows than it has flows
					// (its channel holds all of them): it recounts its
					// flows on the first it reads anyway (onFlowRemoved).
				}
			}
		case <-r.of.Done():
			return
		}
	}
}

// subscribe hands the removals of the flows with cookie (a trace's, under
// cookieMask) to the returned channel until unsubscribe is called.
func (r *removals) subscribe(cookie uint64) (<-chan openflow.FlowRemoved, func()) {
	ch := make(chan openflow.FlowRemoved, 1024)
	r.mu.Lock()
	r.subs[cookie] = ch
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.subs, cookie)
		r.mu.Unlock()
	}
}

func (r *removals) Connected() bool {
	select {
	case <-r.of.Done():
		return false
	default:
		return true
	}
}

func (r *removals) Close() { r.of.Close() }

// hearRemovals makes the session hear of its removed flows through the
// cache's connection for its bridge, and no longer through its own, where
// it has a cache; where that cannot be set up it hears them on its own,
// as without a cache. quiet says its connection (an earlier trace's) has
// them off already.
func (s *session) hearRemovals(ctx context.Context, mgmt string, quiet bool) {
	if s.c.Cache == nil {
		return
	}
	r, err := kept(s.c.Cache, &s.c.Cache.removals, mgmt, func() (*removals, error) { return watchRemovals(ctx, mgmt, s.c.Logf) })
	if err != nil {
		s.c.Logf("flow removals through this trace's own connection: %v", err)
		return
	}
	ch, unsubscribe := r.subscribe(s.cookie)
	if quiet {
		s.removed, s.unhear = ch, unsubscribe
		return
	}
	err = s.of.Send(openflow.NoFlowRemoved(s.of.NextXid()))
	if err == nil {
		err = s.of.Barrier(ctx)
	}
	if err != nil {
		unsubscribe()
		s.c.Logf("flow removals through this trace's own connection: turning them off on it failed: %v", err)
		return
	}
	s.removed, s.unhear = ch, unsubscribe
}

// flowRemoved is where the session hears of its removed flows.
func (s *session) flowRemoved() <-chan openflow.FlowRemoved {
	if s.removed != nil {
		return s.removed
	}
	return s.of.FlowRemoved()
}
