//go:build integration

package dscp_test

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
)

// A packet that cannot be delivered (a UDP probe to a closed port, a real
// datagram alike) is answered by the destination's kernel with an ICMP
// error, and that error carries a DSCP (and an ECN codepoint) of the
// kernel's choosing. Were they a tag of the pool, the flows of another
// trace running with that tag would take the error for their probe. So
// every TOS byte (each DSCP with each ECN codepoint), IPv4 and IPv6, is
// sent to a closed port of a real kernel (two network namespaces, a veth
// pair) and the error's must not be a tag's.
func TestIntegrationKernelICMPErrorsCarryNoTag(t *testing.T) {
	a, b := fmt.Sprintf("tfdscp-a-%d", unix.Getpid()), fmt.Sprintf("tfdscp-b-%d", unix.Getpid())
	sh(t, "ip netns add "+a+" && ip netns add "+b)
	t.Cleanup(func() { _ = exec.Command("sh", "-c", "ip netns del "+a+"; ip netns del "+b).Run() })
	sh(t, strings.Join([]string{
		"ip -n " + a + " link add d0 type veth peer name d1 netns " + b,
		"ip -n " + a + " addr add 10.251.0.1/24 dev d0", "ip -n " + b + " addr add 10.251.0.2/24 dev d1",
		"ip -n " + a + " -6 addr add fd00:251::1/64 dev d0 nodad", "ip -n " + b + " -6 addr add fd00:251::2/64 dev d1 nodad",
		"ip -n " + a + " link set d0 up", "ip -n " + b + " link set d1 up",
		// One error per probe, however fast they come.
		"ip netns exec " + b + " sysctl -qw net.ipv4.icmp_ratelimit=0 net.ipv6.icmp.ratelimit=0 net.ipv4.icmp_msgs_burst=10000 net.ipv4.icmp_msgs_per_sec=100000",
	}, " && "))
	seen := map[string]map[uint8][]int{"IPv4": {}, "IPv6": {}}
	err := ovstest.InNetns(a, func() error {
		capture, err := capture("d0")
		if err != nil {
			return err
		}
		defer func() { _ = unix.Close(capture) }()
		for _, v6 := range []bool{false, true} {
			family := map[bool]string{false: "IPv4", true: "IPv6"}[v6]
			for tos := range 256 {
				port := 40000 + tos
				if v6 {
					port += 300
				}
				got, err := errorTOS(capture, v6, tos, port)
				if err != nil {
					return fmt.Errorf("%s, TOS %#x: %w", family, tos, err)
				}
				seen[family][got] = append(seen[family][got], tos)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range []string{"IPv4", "IPv6"} {
		by := seen[family]
		for _, got := range slices.Sorted(maps.Keys(by)) {
			from := by[got]
			t.Logf("%s: the kernel's ICMP error carries DSCP %d, ECN %d for packets with TOS %v", family, got>>2, got&3, from)
			if tag := dscp.FromTOS(got); dscp.ValidTag(tag) && slices.Contains(dscp.Pool(), dscp.Value(tag)) {
				t.Errorf("%s: an ICMP error to a packet with TOS %v carries tag %s, of the pool %v", family, from, dscp.Name(tag), dscp.Pool())
			}
		}
	}
}

// capture opens a packet socket on the named interface of the calling
// thread's network namespace.
func capture(ifname string) (int, error) {
	proto := int(uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, err
	}
	ifi, err := net.InterfaceByName(ifname)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index})
	}
	if err == nil {
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	}
	if err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// errorTOS sends one UDP datagram with the TOS byte (IPv6 traffic class)
// tos from port to the other namespace's closed port 9 and returns the TOS
// of the ICMP error that answers it (the one quoting that source port).
func errorTOS(capture int, v6 bool, tos, port int) (uint8, error) {
	domain, level, opt := unix.AF_INET, unix.IPPROTO_IP, unix.IP_TOS
	var to unix.Sockaddr = &unix.SockaddrInet4{Port: 9, Addr: [4]byte{10, 251, 0, 2}}
	if v6 {
		domain, level, opt = unix.AF_INET6, unix.IPPROTO_IPV6, unix.IPV6_TCLASS
		to = &unix.SockaddrInet6{Port: 9, Addr: [16]byte{0xfd, 0, 0x02, 0x51, 15: 2}}
	}
	fd, err := unix.Socket(domain, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer func() { _ = unix.Close(fd) }()
	var from unix.Sockaddr = &unix.SockaddrInet4{Port: port}
	if v6 {
		from = &unix.SockaddrInet6{Port: port}
	}
	if err := unix.Bind(fd, from); err != nil {
		return 0, err
	}
	if err := unix.SetsockoptInt(fd, level, opt, tos); err != nil {
		return 0, err
	}
	if err := unix.Sendto(fd, []byte("probe"), 0, to); err != nil {
		return 0, err
	}
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(capture, buf, 0)
		if err != nil {
			continue
		}
		if got, ok := quotingError(buf[:n], v6, port); ok {
			return got, nil
		}
	}
	return 0, fmt.Errorf("no ICMP error within 3s")
}

// quotingError returns the TOS byte (traffic class) of frame if it is an ICMP (v6) destination
// unreachable quoting a UDP datagram from port.
func quotingError(frame []byte, v6 bool, port int) (uint8, bool) {
	if len(frame) < 14 {
		return 0, false
	}
	ip := frame[14:]
	switch et := binary.BigEndian.Uint16(frame[12:]); {
	case !v6 && et == 0x0800 && len(ip) >= 20+8+20+4 && ip[9] == 1:
		icmp := ip[int(ip[0]&0x0f)*4:]
		quoted := icmp[8:]
		if icmp[0] != 3 || len(quoted) < 20+2 || quoted[9] != 17 {
			return 0, false
		}
		return ip[1], int(binary.BigEndian.Uint16(quoted[int(quoted[0]&0x0f)*4:])) == port
	case v6 && et == 0x86dd && len(ip) >= 40+8+40+2 && ip[6] == 58:
		icmp, quoted := ip[40:], ip[48:]
		if icmp[0] != 1 || quoted[6] != 17 {
			return 0, false
		}
		tclass := ip[0]<<4 | ip[1]>>4
		return tclass, int(binary.BigEndian.Uint16(quoted[40:])) == port
	}
	return 0, false
}

func sh(t *testing.T, script string) {
	t.Helper()
	if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}
