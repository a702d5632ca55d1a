//go:build !linux

package tracer

import (
	"errors"
	"net/netip"
)

// KernelRoute needs Linux's netlink: the helper runs on Linux nodes only.
func KernelRoute(netip.Addr) (Route, error) {
	return Route{}, errors.New("a probe from the node needs the node's Linux routing table")
}
