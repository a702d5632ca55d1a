package tracer

import (
	"context"
	"sync"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
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
// their node and may share: each bridge's table names. A one-shot helper
// has none, and reads them for its one trace. The zero value is ready.
type NodeCache struct {
	// Now is the clock (time.Now where nil).
	Now func() time.Time

	mu     sync.Mutex
	tables map[string]cachedTables // by run directory and bridge
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
