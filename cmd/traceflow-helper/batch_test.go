package main

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

// recorder keeps each write it is given, and signals it.
type recorder struct {
	mu     sync.Mutex
	writes [][]byte
	signal chan struct{}
	err    error
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.writes = append(r.writes, append([]byte(nil), p...))
	r.mu.Unlock()
	r.signal <- struct{}{}
	return len(p), r.err
}

// wait returns once a write has reached r, failing after 5 s.
func (r *recorder) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.signal:
	case <-time.After(5 * time.Second):
		t.Fatal("nothing was written")
	}
}

func (r *recorder) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

// Lines written together go out in one write, in order, once the batch's
// delay has passed with nothing else to do; a batch of batchMax goes at
// once; Close writes what is held.
func TestBatchedWritesABurstAtOnce(t *testing.T) {
	r := &recorder{signal: make(chan struct{}, 16)}
	b := &batched{out: r}
	for _, l := range []string{"a\n", "b\n", "c\n"} {
		if _, err := b.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	r.wait(t)
	if w := r.got(); len(w) != 1 || string(w[0]) != "a\nb\nc\n" {
		t.Fatalf("writes %q, want one of the three lines in order", w)
	}
	big := bytes.Repeat([]byte("x"), batchMax)
	if _, err := b.Write(big); err != nil {
		t.Fatal(err)
	}
	if w := r.got(); len(w) != 2 || len(w[1]) != batchMax {
		t.Fatalf("a full batch was not written at once: %d writes", len(w))
	}
	r.wait(t)
	if _, err := b.Write([]byte("last\n")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if w := r.got(); len(w) != 3 || string(w[2]) != "last\n" {
		t.Fatalf("Close did not write what was held: %q", w)
	}
}

// A failed write is returned by the next write and by Close.
func TestBatchedReportsAFailedWrite(t *testing.T) {
	r := &recorder{signal: make(chan struct{}, 16), err: errors.New("broken pipe")}
	b := &batched{out: r}
	if _, err := b.Write([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	if _, err := b.Write([]byte("b\n")); err == nil {
		t.Error("a write after a failed one succeeded")
	}
	if err := b.Close(); err == nil {
		t.Error("Close after a failed write succeeded")
	}
}
