package main

import (
	"io"
	"sync"
	"time"
)

// batchDelay is how long serve holds a line before writing it, to write it
// with the lines that follow it at once. A trace's lines come in bursts
// (its observations as the probe's packet-ins arrive, its result and
// cleanup), and every write to standard output wakes the container
// runtime, which writes the log, and the kubelet and the API server, which
// carry it to the plugin: one write per burst instead of one per line.
const batchDelay = 2 * time.Millisecond

// batchMax is how much serve holds at most: more is written at once.
const batchMax = 64 * 1024

// batched is serve's standard output: what is written to it is written to
// out batchDelay after the first byte of a batch, in order, in one write.
// A write error is returned by the write after it, and Close.
type batched struct {
	out io.Writer

	mu      sync.Mutex
	buf     []byte
	pending bool
	err     error
}

func (b *batched) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return 0, b.err
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= batchMax {
		b.flushLocked()
		return len(p), nil
	}
	if !b.pending {
		b.pending = true
		time.AfterFunc(batchDelay, b.flush)
	}
	return len(p), nil
}

func (b *batched) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = false
	b.flushLocked()
}

func (b *batched) flushLocked() {
	if len(b.buf) == 0 || b.err != nil {
		return
	}
	_, b.err = b.out.Write(b.buf)
	b.buf = b.buf[:0]
}

// Close writes what is held.
func (b *batched) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	return b.err
}
