package openflow

import "sync"

// queue hands what the read loop decodes to the session's reader, in
// order, holding up to limit items the reader has not taken yet (what
// comes beyond that is dropped, as a full buffered channel's was), with
// room allocated as items come instead of for limit up front: a channel
// of 4096 packet-ins (352 bytes each) was 1.4 MB allocated and cleared
// per connection, and a matrix opens several connections per cell
// (measured in the lab: 6% of a shared helper's CPU samples were that
// allocation, before the garbage collection it caused).
type queue[T any] struct {
	limit int
	out   chan T

	mu    sync.Mutex
	items []T
	ended bool
	wake  chan struct{}
}

func newQueue[T any](limit int) *queue[T] {
	return &queue[T]{limit: limit, out: make(chan T), wake: make(chan struct{}, 1)}
}

// push queues v and reports whether there was room for it.
func (q *queue[T]) push(v T) bool {
	q.mu.Lock()
	if len(q.items) >= q.limit {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	q.poke()
	return true
}

// end says nothing more will be pushed: once the reader has taken what is
// queued, out is closed (if the queue closes it).
func (q *queue[T]) end() {
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
	q.poke()
}

// clear drops what is queued (not an item the pump holds already).
func (q *queue[T]) clear() {
	q.mu.Lock()
	q.items = nil
	q.mu.Unlock()
}

func (q *queue[T]) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pump delivers the queued items to out until the queue has ended and
// everything in it was taken, or quit is closed (what is still queued then
// is dropped); either way it closes out if closeOut.
func (q *queue[T]) pump(quit <-chan struct{}, closeOut bool) {
	if closeOut {
		defer close(q.out)
	}
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			ended := q.ended
			q.items = nil // let what was taken go
			q.mu.Unlock()
			if ended {
				return
			}
			select {
			case <-q.wake:
			case <-quit:
				return
			}
			continue
		}
		v := q.items[0]
		var zero T
		q.items[0] = zero
		q.items = q.items[1:]
		q.mu.Unlock()
		select {
		case q.out <- v:
		case <-quit:
			return
		}
	}
}
