package tracer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovn"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
)

// TableNamesMaxAge is how long a NodeCache keeps a bridge's table names
// before a trace reads them again.
//
// Reading them (TABLE_FEATURES) costs OVS's main thread about 9 ms and the
// helper about 13 (measured in the lab, 2026-12-07): a matrix of 420 cells
// paid that twice a cell, on each node, for names that do not change while
// the CNI that set them runs. They change only when it restarts with
// another pipeline (Antrea numbers its tables at its agent's start), so a
// trace started within this long after such a restart may name its hops
// after the tables of the pipeline before; never one started later.
const TableNamesMaxAge = 5 * time.Second

// NodeCache keeps what the traces of one long-lived helper (serve) read of
// their node and may share: each bridge's table names, monitors of
// OVSDB's bridges, ports and interfaces and of the OVN rows that name
// hops, and the connection that hears each bridge's flow removals. A one-shot helper has none, and reads them for its one trace. The
// zero value is ready; Close ends it.
type NodeCache struct {
	// Now is the clock (time.Now where nil).
	Now func() time.Time

	mu      sync.Mutex
	tables  map[string]cachedTables // by run directory and bridge
	reading map[string]*tableRead   // reads in progress, by the same key

	liveMu sync.Mutex
	live   map[string]*ovsdb.Live // by OVSDB endpoint
	ovn    map[string]*ovn.Live   // by southbound and northbound endpoint
	// removals hears each bridge's flow removals (removals.go), by its
	// OpenFlow socket.
	removals map[string]*removals
	closed   bool

	// idle are OpenFlow connections that traces handed back (ofpool.go),
	// by management socket.
	connMu      sync.Mutex
	idle        map[string][]idleConn
	ctl         map[string]*ofproto.Conns // by control socket
	connsClosed bool
}

type cachedTables struct {
	names TableNames
	read  time.Time
}

// tableNames returns a bridge's table names, from c where it read them
// within TableNamesMaxAge, else through read (readTableNames, on a
// connection to that bridge).
// Traces that find the names old at once share one read: the first reads,
// the others wait for it (a matrix's traces start many at a time, and
// each read cost OVS's main thread about 9 ms: before this, about 40
// reads a matrix on a node where one every 5 s would do). No lock is held
// while reading, and a waiter stops waiting when its own context ends: a
// trace that is stopped must not wait for another's read (on a hung OVS,
// for that one's timeout); a waiter whose reader failed reads itself. A
// nil c always reads.
func (c *NodeCache) tableNames(ctx context.Context, key string, read func(context.Context) (TableNames, error)) (TableNames, error) {
	if c == nil {
		return read(ctx)
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	for {
		c.mu.Lock()
		t, ok := c.tables[key]
		if ok && now().Sub(t.read) < TableNamesMaxAge {
			c.mu.Unlock()
			return t.names, nil
		}
		if f := c.reading[key]; f != nil {
			f.waiting++
			c.mu.Unlock()
			select {
			case <-f.done:
				if f.err == nil {
					return f.names, nil
				}
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		f := &tableRead{done: make(chan struct{})}
		if c.reading == nil {
			c.reading = map[string]*tableRead{}
		}
		c.reading[key] = f
		c.mu.Unlock()
		at := now()
		f.names, f.err = read(ctx)
		c.mu.Lock()
		delete(c.reading, key)
		if f.err == nil {
			if c.tables == nil {
				c.tables = map[string]cachedTables{}
			}
			if cur, ok := c.tables[key]; !ok || cur.read.Before(at) {
				c.tables[key] = cachedTables{names: f.names, read: at}
			}
		}
		c.mu.Unlock()
		close(f.done)
		return f.names, f.err
	}
}

// tableRead is one read of a bridge's table names in progress: done is
// closed once names and err are set; waiting counts the traces that
// waited for it (under NodeCache.mu).
type tableRead struct {
	done    chan struct{}
	names   TableNames
	err     error
	waiting int
}

// monitor is a kept connection to a database: ovsdb.Live or ovn.Live.
type monitor interface {
	Connected() bool
	Close()
}

// kept returns the monitor c keeps under key in m, or one that start
// opens (and c then keeps) where c has none or its connection broke. No
// lock is held while start connects, for the reason tableNames gives; of
// two traces that start one at once, the later keeps the other's.
func kept[M monitor](c *NodeCache, m *map[string]M, key string, start func() (M, error)) (M, error) {
	c.liveMu.Lock()
	cur, ok := (*m)[key]
	c.liveMu.Unlock()
	if ok && cur.Connected() {
		return cur, nil
	}
	l, err := start()
	if err != nil {
		return l, err
	}
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	if c.closed {
		l.Close()
		var none M
		return none, errors.New("the helper is stopping")
	}
	if cur, ok := (*m)[key]; ok && cur.Connected() {
		l.Close()
		return cur, nil
	}
	if ok {
		cur.Close()
	}
	if *m == nil {
		*m = map[string]M{}
	}
	(*m)[key] = l
	return l, nil
}

// node returns the node's OVS layout read from OVSDB at endpoint: through
// the cache's monitor where c is set, else read anew.
func (c *NodeCache) node(ctx context.Context, endpoint string) (*ovsdb.Node, error) {
	if c == nil {
		return ovsdb.Snapshot(ctx, endpoint)
	}
	l, err := kept(c, &c.live, endpoint, func() (*ovsdb.Live, error) { return ovsdb.Watch(ctx, endpoint) })
	if err != nil {
		return nil, err
	}
	return l.Node(ctx)
}

// ovnDB returns the rows of OVN's databases that name the hops: through
// the cache's monitors where c is set, else read anew.
func (c *NodeCache) ovnDB(ctx context.Context, sb, nb string) (ovn.DB, error) {
	if c == nil {
		return ovn.Read(ctx, sb, nb, ovnReadBudget)
	}
	l, err := kept(c, &c.ovn, sb+"\x00"+nb, func() (*ovn.Live, error) { return ovn.Watch(ctx, sb, nb) })
	if err != nil {
		return ovn.DB{}, err
	}
	return l.DB(ctx)
}

// Close ends what c keeps open, and c keeps nothing opened after. The
// traces that used it have ended.
func (c *NodeCache) Close() {
	if c == nil {
		return
	}
	c.closeConns()
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	for _, l := range c.live {
		l.Close()
	}
	for _, l := range c.ovn {
		l.Close()
	}
	for _, r := range c.removals {
		r.Close()
	}
	c.live, c.ovn, c.removals, c.closed = nil, nil, nil, true
}
