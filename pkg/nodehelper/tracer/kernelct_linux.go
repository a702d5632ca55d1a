package tracer

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// kernelCT watches the connections the node's kernel starts tracking: it
// is opened before the probe is injected, so that the probe's own is not
// missed.
type kernelCT struct{ fd int }

// openKernelCT subscribes to the kernel's new connections.
func openKernelCT() (*kernelCT, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open a netfilter netlink socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (unix.NFNLGRP_CONNTRACK_NEW - 1)}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("subscribe to the kernel's new connections: %w", err)
	}
	return &kernelCT{fd: fd}, nil
}

func (k *kernelCT) Close() { _ = unix.Close(k.fd) }

// probeConn waits until deadline for the kernel to start tracking the
// connection whose original direction is orig, in the host's own zone
// (0; OVS's kernel datapath tracks the probe in zones of its own). It
// returns the connection and whether the helper saw it made (the probe's
// own), or errCTNotFound. Where the events cannot tell (a full socket
// buffer drops them), it asks the kernel for the connection instead.
func (k *kernelCT) probeConn(orig ctTuple, deadline time.Time) (ctEntry, bool, error) {
	buf := make([]byte, 1<<16)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(k.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			break
		}
		n, _, err := unix.Recvfrom(k.fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			break
		}
		entries, _ := parseCTMessages(buf[:n])
		for _, e := range entries {
			if e.Zone == 0 && e.Orig == orig {
				return e, true, nil
			}
		}
	}
	e, err := ctQuery(ctMsgGet, orig)
	return e, false, err
}

// ctQuery sends one ctnetlink request for the connection orig and reads
// the kernel's answer: the connection (ctMsgGet), or none (ctMsgDelete).
func ctQuery(msg uint16, orig ctTuple) (ctEntry, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return ctEntry{}, fmt.Errorf("open a netfilter netlink socket: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	tv := unix.Timeval{Sec: 2}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return ctEntry{}, err
	}
	if err := unix.Sendto(fd, ctRequest(msg, 1, orig), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return ctEntry{}, err
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return ctEntry{}, err
		}
		entries, err := parseCTMessages(buf[:n])
		switch {
		case err != nil:
			return ctEntry{}, err
		case len(entries) > 0:
			return entries[0], nil
		case msg == ctMsgDelete:
			return ctEntry{}, nil
		}
	}
}
