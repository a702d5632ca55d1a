package tracerun

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/engine"
)

// FactsCache keeps the facts the engine choice rests on for the length of
// one run of many traces (a check suite, a matrix): Antrea's health is
// read once per set of nodes, not once per trace, so that a run of 400
// traces asks the API server for it a handful of times and chooses the
// same engine for every trace over the same nodes. So are the helper
// namespace and, for a second at a time, the tags of other engines'
// traces. A single trace does without one: it reads the facts when it
// starts.
type FactsCache struct {
	mu         sync.Mutex
	facts      map[string]engine.Facts
	namespaces map[string]namespaceRead

	tagsMu   sync.Mutex
	tags     map[uint8]bool
	tagsRead time.Time
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

// namespaceGetter returns get, reading each namespace once per run where c
// is set: the helper namespace's existence and PodSecurity label are
// checked before every trace, and do not change while a run lasts. A read
// that failed but for the namespace's absence is not kept.
func (c *FactsCache) namespaceGetter(get namespaceGet) namespaceGet {
	if c == nil {
		return get
	}
	return func(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Namespace, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if r, ok := c.namespaces[name]; ok {
			return r.ns, r.err
		}
		ns, err := get(ctx, name, opts)
		if err == nil || apierrors.IsNotFound(err) {
			if c.namespaces == nil {
				c.namespaces = map[string]namespaceRead{}
			}
			c.namespaces[name] = namespaceRead{ns, err}
		}
		return ns, err
	}
}

type namespaceGet = func(context.Context, string, metav1.GetOptions) (*corev1.Namespace, error)

type namespaceRead struct {
	ns  *corev1.Namespace
	err error
}

// antreaTagsMaxAge is how long a run uses one list of the tags other
// engines' traces carry. The list only matters to an Antrea that
// allocates from our pool, which Antrea v2 does not (antreaTags), and is
// a snapshot whatever its age: a trace that starts after it is not in it.
// Listing every Traceflow for each claim cost a run two lists a cell.
const antreaTagsMaxAge = time.Second

// inUse returns list, answered from one list per antreaTagsMaxAge where c
// is set; traces that ask at once wait for one list. A failed list is not
// kept.
func (c *FactsCache) inUse(list func(context.Context) (map[uint8]bool, error), now func() time.Time) func(context.Context) (map[uint8]bool, error) {
	if c == nil {
		return list
	}
	return func(ctx context.Context) (map[uint8]bool, error) {
		c.tagsMu.Lock()
		defer c.tagsMu.Unlock()
		if c.tags != nil && now().Sub(c.tagsRead) < antreaTagsMaxAge {
			return maps.Clone(c.tags), nil
		}
		read := now()
		tags, err := list(ctx)
		if err != nil {
			return nil, err
		}
		c.tags, c.tagsRead = tags, read
		return maps.Clone(tags), nil
	}
}
