//go:build !linux

package tracer

import (
	"errors"
	"time"
)

// kernelCT needs Linux's netlink: the helper runs on Linux nodes only.
type kernelCT struct{}

func openKernelCT() (*kernelCT, error) {
	return nil, errors.New("the kernel's connection tracking is read on Linux only")
}

func (k *kernelCT) Close() {}

func (k *kernelCT) probeConn(ctTuple, time.Time) (ctEntry, bool, error) {
	return ctEntry{}, false, errCTNotFound
}

func ctQuery(uint16, ctTuple) (ctEntry, error) { return ctEntry{}, errCTNotFound }
