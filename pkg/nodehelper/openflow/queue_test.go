package openflow

import (
	"testing"
	"time"
)

// The reader gets every item in order, up to the limit it has not taken:
// what comes beyond that is dropped, and the channel closes once the
// queue has ended and the reader took what was in it.
func TestQueueInOrderBoundedClosesAfterDrain(t *testing.T) {
	q := newQueue[int](3)
	for i := 1; i <= 5; i++ {
		if ok := q.push(i); ok != (i <= 3) {
			t.Fatalf("push %d: room %v, want %v", i, ok, i <= 3)
		}
	}
	q.end()
	go q.pump(make(chan struct{}), true)
	var got []int
	for v := range q.out {
		got = append(got, v)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("read %v, want [1 2 3]", got)
	}
}

// Items pushed while the pump waits reach the reader; a taken item frees
// its room.
func TestQueueWakesAndFreesRoom(t *testing.T) {
	q := newQueue[int](1)
	quit := make(chan struct{})
	defer close(quit)
	go q.pump(quit, true)
	for i := range 100 {
		if !q.push(i) {
			t.Fatalf("push %d found no room though every earlier item was taken", i)
		}
		select {
		case v := <-q.out:
			if v != i {
				t.Fatalf("read %d, want %d", v, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("item %d never reached the reader", i)
		}
	}
}

// Quit ends the pump with items still queued, and closes the channel of a
// queue that closes it (a session's packet-ins at Close).
func TestQueueQuitDropsTheRest(t *testing.T) {
	q := newQueue[int](8)
	q.push(1)
	q.push(2)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() { q.pump(quit, true); close(done) }()
	if v := <-q.out; v != 1 {
		t.Fatalf("read %d, want 1", v)
	}
	close(quit)
	<-done
	// The pump has returned: out is closed, and 2, still queued, is
	// dropped (a value of 2 here would mean it was not).
	for v := range q.out {
		if v != 2 {
			t.Fatalf("read %d after quit", v)
		}
	}
}
