package tracer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A read of the table names that the test lets go when it wants, and
// counts.
type namesRead struct {
	calls   atomic.Int32
	release chan struct{}
	err     error
}

func (r *namesRead) read(ctx context.Context) (TableNames, error) {
	r.calls.Add(1)
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	return TableNames{0: "Classifier"}, nil
}

// Traces that find the names old at once share one read; the names are
// then served from the cache until they are TableNamesMaxAge old.
func TestTableNamesOneReadForManyTraces(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	c := &NodeCache{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	r := &namesRead{release: make(chan struct{})}
	const traces = 8
	var wg sync.WaitGroup
	errs := make(chan error, traces)
	for range traces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names, err := c.tableNames(context.Background(), "br-int", r.read)
			if err == nil && names[0] != "Classifier" {
				err = errors.New("wrong names")
			}
			errs <- err
		}()
	}
	// Every trace is either reading or waiting for that read before the
	// read ends: one reader, the others registered behind it.
	waitFor(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.reading["br-int"] != nil
	})
	close(r.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := r.calls.Load(); n < 1 || n > traces {
		t.Fatalf("%d reads", n)
	}
	before := r.calls.Load()
	if _, err := c.tableNames(context.Background(), "br-int", r.read); err != nil || r.calls.Load() != before {
		t.Fatalf("fresh names read again (%d reads, %v)", r.calls.Load(), err)
	}
	mu.Lock()
	now = now.Add(TableNamesMaxAge)
	mu.Unlock()
	if _, err := c.tableNames(context.Background(), "br-int", r.read); err != nil || r.calls.Load() != before+1 {
		t.Fatalf("old names not read again (%d reads, %v)", r.calls.Load(), err)
	}
}

// While one trace reads, the others wait for it: exactly one read for
// traces that arrive during it.
func TestTableNamesWaitersDoNotRead(t *testing.T) {
	c := &NodeCache{}
	r := &namesRead{release: make(chan struct{})}
	first := make(chan error, 1)
	go func() {
		_, err := c.tableNames(context.Background(), "br-int", r.read)
		first <- err
	}()
	waitFor(t, func() bool { return r.calls.Load() == 1 })
	const waiters = 5
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.tableNames(context.Background(), "br-int", r.read); err != nil {
				t.Error(err)
			}
		}()
	}
	waitFor(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		f := c.reading["br-int"]
		return f != nil && f.waiting == waiters
	})
	close(r.release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("%d reads for %d traces during one, want 1", n, waiters+1)
	}
}

// A waiter stops waiting when its own context ends; a waiter whose reader
// failed (its trace was stopped, say) reads the names itself.
func TestTableNamesWaiterOwnContextAndFailedReader(t *testing.T) {
	c := &NodeCache{}
	hung := &namesRead{release: make(chan struct{})}
	readerCtx, stopReader := context.WithCancel(context.Background())
	reader := make(chan error, 1)
	go func() {
		_, err := c.tableNames(readerCtx, "br-int", hung.read)
		reader <- err
	}()
	waitFor(t, func() bool { return hung.calls.Load() == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.tableNames(ctx, "br-int", hung.read); !errors.Is(err, context.Canceled) {
		t.Fatalf("a stopped waiter: %v, want its own context's end", err)
	}

	own := &namesRead{release: make(chan struct{})}
	close(own.release)
	waiter := make(chan error, 1)
	go func() {
		names, err := c.tableNames(context.Background(), "br-int", own.read)
		if err == nil && names[0] != "Classifier" {
			err = errors.New("wrong names")
		}
		waiter <- err
	}()
	// While the reader hangs, the waiter reads nothing of its own.
	if n := own.calls.Load(); n != 0 {
		t.Fatalf("the waiter read while another read was in progress (%d)", n)
	}
	stopReader()
	if err := <-reader; !errors.Is(err, context.Canceled) {
		t.Fatalf("reader: %v", err)
	}
	if err := <-waiter; err != nil {
		t.Fatalf("waiter after its reader failed: %v", err)
	}
	if own.calls.Load() != 1 {
		t.Fatalf("the waiter read %d times, want once after its reader failed", own.calls.Load())
	}
}

// waitFor polls cond until it holds (a wait on a condition, not a fixed
// sleep); 5 s without it fails the test.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
