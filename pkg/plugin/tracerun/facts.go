package tracerun

import (
	"context"
	"strings"
	"sync"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/engine"
)

// FactsCache keeps the facts the engine choice rests on for the length of
// one run of many traces (a check suite, a matrix): Antrea's health is
// read once per set of nodes, not once per trace, so that a run of 400
// traces asks the API server for it a handful of times and chooses the
// same engine for every trace over the same nodes. A single trace does
// without one: it reads the facts when it starts.
type FactsCache struct {
	mu    sync.Mutex
	facts map[string]engine.Facts
}

// NewFactsCache returns an empty cache.
func NewFactsCache() *FactsCache { return &FactsCache{facts: map[string]engine.Facts{}} }

// gather returns the facts for nodes, read by read the first time a set of
// nodes is asked for. A failed read is not kept: the next trace asks again.
func (c *FactsCache) gather(ctx context.Context, nodes []string, read func(context.Context, []string) (engine.Facts, error)) (engine.Facts, error) {
	if c == nil {
		return read(ctx, nodes)
	}
	key := strings.Join(nodes, "\x00")
	c.mu.Lock()
	defer c.mu.Unlock() // one read at a time: the traces that wait would read the same
	if f, ok := c.facts[key]; ok {
		return f, nil
	}
	f, err := read(ctx, nodes)
	if err == nil {
		c.facts[key] = f
	}
	return f, err
}
