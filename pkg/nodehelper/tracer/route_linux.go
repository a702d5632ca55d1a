package tracer

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// KernelRoute asks the kernel of the helper's network namespace (the
// node's: helpers run with hostNetwork) how it sends a packet to dst, as
// `ip route get DST` does: one RTM_GETROUTE request, so the answer takes
// every routing rule and table into account, not only the main table.
func KernelRoute(dst netip.Addr) (Route, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return Route{}, fmt.Errorf("open a netlink socket: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	tv := unix.Timeval{Sec: 2}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return Route{}, fmt.Errorf("netlink socket timeout: %w", err)
	}
	if err := unix.Sendto(fd, routeRequest(dst), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return Route{}, fmt.Errorf("ask the kernel for its route to %s: %w", dst, err)
	}
	buf := make([]byte, 1<<16)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return Route{}, fmt.Errorf("read the kernel's route to %s: %w", dst, err)
	}
	r, err := parseRouteReply(buf[:n])
	if err != nil {
		return Route{}, fmt.Errorf("the kernel's route to %s: %w", dst, err)
	}
	ifc, err := net.InterfaceByIndex(r.ifindex)
	if err != nil {
		return Route{}, fmt.Errorf("the kernel routes %s through interface %d: %w", dst, r.ifindex, err)
	}
	r.Dev, r.MAC = ifc.Name, ifc.HardwareAddr
	if !r.Src.IsValid() {
		r.Src = firstAddr(ifc, dst.Is4())
	}
	return r, nil
}

// routeRequest is RTM_GETROUTE for dst: a netlink header, an rtmsg and
// one RTA_DST attribute.
func routeRequest(dst netip.Addr) []byte {
	addr := dst.AsSlice()
	family := uint8(unix.AF_INET)
	if dst.Is6() {
		family = unix.AF_INET6
	}
	attrLen := unix.SizeofRtAttr + len(addr)
	total := unix.SizeofNlMsghdr + unix.SizeofRtMsg + attrLen
	b := make([]byte, total)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(total)) //nolint:gosec // under 64
	ne.PutUint16(b[4:], unix.RTM_GETROUTE)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(b[8:], 1)
	rt := b[unix.SizeofNlMsghdr:]
	rt[0] = family
	rt[1] = uint8(len(addr) * 8) //nolint:gosec // 32 or 128
	at := rt[unix.SizeofRtMsg:]
	ne.PutUint16(at[0:], uint16(attrLen)) //nolint:gosec // under 64
	ne.PutUint16(at[2:], unix.RTA_DST)
	copy(at[unix.SizeofRtAttr:], addr)
	return b
}

// parseRouteReply reads the kernel's answer to routeRequest: the output
// interface, the gateway (none for an on-link destination) and the
// preferred source address.
func parseRouteReply(b []byte) (Route, error) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return Route{}, err
	}
	for i := range msgs {
		m := &msgs[i]
		switch m.Header.Type {
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 { //nolint:gosec // the kernel's errno, negated
					return Route{}, syscall.Errno(-code)
				}
			}
		case unix.RTM_NEWROUTE:
			return routeAttrs(m)
		}
	}
	return Route{}, fmt.Errorf("no route in the kernel's answer")
}

func routeAttrs(m *syscall.NetlinkMessage) (Route, error) {
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return Route{}, err
	}
	var r Route
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.RTA_OIF:
			if len(a.Value) >= 4 {
				r.ifindex = int(binary.NativeEndian.Uint32(a.Value))
			}
		case unix.RTA_GATEWAY:
			r.Gateway, _ = netip.AddrFromSlice(a.Value)
		case unix.RTA_PREFSRC:
			r.Src, _ = netip.AddrFromSlice(a.Value)
		}
	}
	if r.ifindex == 0 {
		return Route{}, fmt.Errorf("the route names no output interface")
	}
	return r, nil
}

// firstAddr is ifc's first address of the family, or the zero Addr.
func firstAddr(ifc *net.Interface, v4 bool) netip.Addr {
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() == v4 && !ip.IsLinkLocalUnicast() {
				return ip.Unmap()
			}
		}
	}
	return netip.Addr{}
}
