package tracer

import (
	"context"
	"sync"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
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
// their node and may share: each bridge's table names, and monitors of
// OVSDB's bridges, ports and interfaces and of the OVN rows that name
// hops. A one-shot helper has none, and
// reads them for its one trace. The zero value is ready; Close ends it.
type NodeCache struct {
	// Now is the clock (time.Now where nil).
	Now func() time.Time

	mu     sync.Mutex
	tables map[string]cachedTables // by run directory and bridge

	liveMu sync.Mutex
	live   map[string]*ovsdb.Live // by OVSDB endpoint
	ovn    map[string]*ovn.Live   // by southbound and northbound endpoint
}

type cachedTables struct {
	names TableNames
	read  time.Time
}

// tableNames returns the table names of the bridge that of is connected
// to, from c where it read them within TableNamesMaxAge, else through of.
// Traces that ask at once wait for one read. A nil c always reads.
func (c *NodeCache) tableNames(ctx context.Context, key string, of *openflow.Session) (TableNames, error) {
	if c == nil {
		return readTableNames(ctx, of)
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.tables[key]; ok && now().Sub(t.read) < TableNamesMaxAge {
		return t.names, nil
	}
	read := now()
	names, err := readTableNames(ctx, of)
	if err != nil {
		return nil, err
	}
	if c.tables == nil {
		c.tables = map[string]cachedTables{}
	}
	c.tables[key] = cachedTables{names: names, read: read}
	return names, nil
}

// node returns the node's OVS layout read from OVSDB at endpoint: through
// the cache's monitor where c is set (started by the first trace, started
// again once its connection broke), else read anew.
func (c *NodeCache) node(ctx context.Context, endpoint string) (*ovsdb.Node, error) {
	if c == nil {
		return ovsdb.Snapshot(ctx, endpoint)
	}
	c.liveMu.Lock()
	l := c.live[endpoint]
	if l == nil || !l.Connected() {
		if l != nil {
			l.Close()
		}
		var err error
		if l, err = ovsdb.Watch(ctx, endpoint); err != nil {
			delete(c.live, endpoint)
			c.liveMu.Unlock()
			return nil, err
		}
		if c.live == nil {
			c.live = map[string]*ovsdb.Live{}
		}
		c.live[endpoint] = l
	}
	c.liveMu.Unlock()
	return l.Node(ctx)
}

// ovnDB returns the rows of OVN's databases that name the hops: through
// the cache's monitors where c is set (started by the first trace, started
// again once a connection broke), else read anew.
func (c *NodeCache) ovnDB(ctx context.Context, sb, nb string) (ovn.DB, error) {
	if c == nil {
		l, err := ovn.Watch(ctx, sb, nb)
		if err != nil {
			return ovn.DB{}, err
		}
		defer l.Close()
		return l.DB(ctx)
	}
	key := sb + "\x00" + nb
	c.liveMu.Lock()
	l := c.ovn[key]
	if l == nil || !l.Connected() {
		if l != nil {
			l.Close()
		}
		var err error
		if l, err = ovn.Watch(ctx, sb, nb); err != nil {
			delete(c.ovn, key)
			c.liveMu.Unlock()
			return ovn.DB{}, err
		}
		if c.ovn == nil {
			c.ovn = map[string]*ovn.Live{}
		}
		c.ovn[key] = l
	}
	c.liveMu.Unlock()
	return l.DB(ctx)
}

// Close ends what c keeps open. The traces that used it have ended.
func (c *NodeCache) Close() {
	if c == nil {
		return
	}
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	for _, l := range c.live {
		l.Close()
	}
	for _, l := range c.ovn {
		l.Close()
	}
	c.live, c.ovn = nil, nil
}
