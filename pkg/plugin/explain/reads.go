package explain

import (
	"sync"
	"time"
)

// ReadsMaxAge is how long the traces of one run share what an Explainer
// read from the API (a pod, a namespace, a namespace's policies).
//
// Naming the policy behind each drop took five reads (both pods, their
// namespace twice, the policies): in a matrix of 420 cells, 300 of them
// dropped, that was 1500 of its 1540 API requests. A drop is explained
// with the API's objects as read at most this long before; the dataplane
// that dropped the probe is itself behind the API by about as much (an
// agent or ovnkube programs a changed policy within a second or so).
const ReadsMaxAge = 2 * time.Second

// Reads keeps, for one run of many traces, what their Explainers read, for
// ReadsMaxAge each. A single trace has none: it reads what it needs. The
// objects kept are shared by the run's traces and never changed.
type Reads struct {
	// Now is the clock (time.Now where nil).
	Now func() time.Time

	mu   sync.Mutex
	kept map[string]keptRead
}

type keptRead struct {
	v    any
	read time.Time
}

// NewReads returns an empty set of reads.
func NewReads() *Reads { return &Reads{kept: map[string]keptRead{}} }

// shared returns what read returns, from r where it was read under key
// within ReadsMaxAge; traces that ask at once wait for one read. A failed
// read is not kept. A nil r always reads.
func shared[T any](r *Reads, key string, read func() (T, error)) (T, error) {
	if r == nil {
		return read()
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.kept[key]; ok && now().Sub(k.read) < ReadsMaxAge {
		return k.v.(T), nil
	}
	at := now()
	v, err := read()
	if err != nil {
		return v, err
	}
	r.kept[key] = keptRead{v: v, read: at}
	return v, nil
}
