package tracer

import (
	"context"
	"path/filepath"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
)

// A serve helper's traces reuse each other's OpenFlow connections, and
// their connections to ovs-vswitchd's control socket (ofproto.Conns).
//
// Each trace had a connection of its own, opened and closed with it; a
// round trip across two nodes opens four. Profiled in the lab during a
// 420-cell matrix, accepting them was 6% of ovs-vswitchd's main thread
// and dialling and setting them up 7% of the helper's samples. A trace
// that ends cleanly (its flows deleted, its last barrier answered) hands
// its connection back; the next trace on that bridge takes it with a
// controller id of its own (openflow.Session.Reuse). What a trace sets
// on its connection besides is the same for every trace of the process:
// the packet-in format and, where it hears its flow removals through the
// cache (removals.go), flow-removed messages off.

// dial gives s its cookie and controller id and opens its OpenFlow
// connection.
func (s *session) dial(ctx context.Context) error {
	r := s.c.Random()
	s.cookie = TraceCookie(s.c.Tag, r)
	// Controller ids 1..0x7fff stay clear of 0, where CNIs' own packet-ins go.
	s.ctlID = uint16(r%0x7ffe) + 1 //nolint:gosec // bounded
	s.mgmt = filepath.Join(s.c.Rundir, s.c.Bridge+".mgmt")
	if ic, ok := s.c.Cache.takeConn(ctx, s.mgmt, s.ctlID, s.c.Logf); ok {
		s.of = ic.of
		s.hearRemovals(ctx, s.mgmt, ic.quiet)
		if !ic.quiet || s.removed != nil {
			return nil
		}
		// Flow removals are off on it and the cache's connection that
		// would tell this trace of them could not be had: a new
		// connection hears them itself.
		s.of.Close()
	}
	var err error
	if s.of, err = openflow.Dial(ctx, s.mgmt, s.ctlID, s.c.Logf); err != nil {
		return setupErr("%w", err)
	}
	s.hearRemovals(ctx, s.mgmt, false)
	return nil
}

// maxIdleConns bounds the idle connections kept per bridge: as many as
// traces that end at once, up to this.
const maxIdleConns = 16

// idleConn is a connection a trace handed back; quiet is whether
// flow-removed messages are off on it.
type idleConn struct {
	of    *openflow.Session
	quiet bool
}

// takeConn returns an idle connection to mgmt that now has controller id
// ctlID and the log logf, or nil where there is none (or none that could
// take the id: it is closed).
func (c *NodeCache) takeConn(ctx context.Context, mgmt string, ctlID uint16, logf func(string, ...any)) (idleConn, bool) {
	if c == nil {
		return idleConn{}, false
	}
	for {
		c.connMu.Lock()
		idle := c.idle[mgmt]
		if len(idle) == 0 {
			c.connMu.Unlock()
			return idleConn{}, false
		}
		ic := idle[len(idle)-1]
		c.idle[mgmt] = idle[:len(idle)-1]
		c.connMu.Unlock()
		if err := ic.of.Reuse(ctx, ctlID, logf); err != nil {
			ic.of.Close()
			if ctx.Err() != nil {
				return idleConn{}, false
			}
			continue
		}
		return ic, true
	}
}

// putConn keeps of, which a trace ended with cleanly, for the next trace
// on mgmt; it closes it where the cache is closed or keeps enough.
func (c *NodeCache) putConn(mgmt string, ic idleConn) {
	if c == nil {
		ic.of.Close()
		return
	}
	select {
	case <-ic.of.Done():
		return
	default:
	}
	c.connMu.Lock()
	if c.connsClosed || len(c.idle[mgmt]) >= maxIdleConns {
		c.connMu.Unlock()
		ic.of.Close()
		return
	}
	if c.idle == nil {
		c.idle = map[string][]idleConn{}
	}
	c.idle[mgmt] = append(c.idle[mgmt], ic)
	c.connMu.Unlock()
}

// ctlConns is what keeps the connections to the control socket sock
// between the traces' calls (nil, a connection per call, without a
// cache).
func (c *NodeCache) ctlConns(sock string) *ofproto.Conns {
	if c == nil {
		return nil
	}
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if c.connsClosed {
		return nil
	}
	if c.ctl == nil {
		c.ctl = map[string]*ofproto.Conns{}
	}
	p := c.ctl[sock]
	if p == nil {
		p = &ofproto.Conns{}
		c.ctl[sock] = p
	}
	return p
}

// closeConns closes the idle connections; connections handed back after
// it are closed.
func (c *NodeCache) closeConns() {
	c.connMu.Lock()
	idle, ctl := c.idle, c.ctl
	c.idle, c.ctl, c.connsClosed = nil, nil, true
	c.connMu.Unlock()
	for _, l := range idle {
		for _, ic := range l {
			ic.of.Close()
		}
	}
	for _, p := range ctl {
		p.Close()
	}
}
