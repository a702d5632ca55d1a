package ovstest

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Pod is a network namespace with eth0, whose peer is a port on br-int.
type Pod struct {
	Node      *Node
	Namespace string
	Name      string
	NS        string
	// Port is the OVS port (host end of the veth).
	Port   string
	Ofport int
	IP     netip.Addr
	IPv6   netip.Addr
	MAC    string
}

// AddPod creates pod namespace/name on the node with IPv4 10.10.INDEX.host
// and IPv6 fd00:10:INDEX::host, routes for the pod and service ranges via
// the gateway (whose MAC is a permanent neighbour, so nothing depends on ARP
// through the pipeline), MTU 1450 (room for Geneve) and TX checksum offload
// off (userspace OVS does not fill checksums in), and records it in OVSDB
// the way Antrea does (external_ids on the Port).
func (n *Node) AddPod(namespace, name string, host int) *Pod {
	n.t.Helper()
	p := &Pod{Node: n, Namespace: namespace, Name: name, NS: "tfp" + suffix(),
		Port: fmt.Sprintf("p%d-%s", n.Index, suffix()[:4]),
		IP:   netip.MustParseAddr(fmt.Sprintf("10.10.%d.%d", n.Index, host)),
		IPv6: netip.MustParseAddr(fmt.Sprintf("fd00:10:%d::%d", n.Index, host)),
		MAC:  fmt.Sprintf("02:00:0a:0a:%02x:%02x", n.Index, host),
	}
	n.pods = append(n.pods, p)
	n.mustRun("ip", "netns", "add", p.NS)
	n.mustRun("ip", "link", "add", p.Port, "netns", n.NS, "type", "veth", "peer", "name", "eth0", "netns", p.NS)
	gw4 := fmt.Sprintf("10.10.%d.1", n.Index)
	gw6 := fmt.Sprintf("fd00:10:%d::1", n.Index)
	p.Sh(strings.Join([]string{
		"ip link set lo up",
		"ip link set eth0 address " + p.MAC + " mtu 1450",
		"ip addr add " + p.IP.String() + "/32 dev eth0",
		"ip addr add " + p.IPv6.String() + "/128 dev eth0 nodad",
		"ip link set eth0 up",
		"ip neigh replace " + gw4 + " lladdr " + n.GatewayMAC + " dev eth0 nud permanent",
		"ip -6 neigh replace " + gw6 + " lladdr " + n.GatewayMAC + " dev eth0 nud permanent",
		"ip route add 10.10.0.0/16 via " + gw4 + " dev eth0 onlink",
		"ip route add 10.96.0.0/12 via " + gw4 + " dev eth0 onlink",
		"ip -6 route add fd00:10::/32 via " + gw6 + " dev eth0 onlink",
		"ethtool -K eth0 tx off >/dev/null 2>&1 || true",
	}, "\n"))
	n.Sh("ip link set " + p.Port + " mtu 1450 up; ethtool -K " + p.Port + " tx off >/dev/null 2>&1 || true")
	n.Vsctl("add-port", n.Bridge, p.Port, "--", "set", "port", p.Port,
		"external_ids:pod-name="+name, "external_ids:pod-namespace="+namespace,
		"external_ids:ip="+p.IP.String()+","+p.IPv6.String(), "external_ids:mac="+p.MAC)
	p.Ofport = n.Ofport(p.Port)
	return p
}

// Sh runs a shell command inside the pod's namespace.
func (p *Pod) Sh(script string) string {
	p.Node.t.Helper()
	return p.Node.mustRun("ip", "netns", "exec", p.NS, "sh", "-ec", script)
}

// In runs fn on an OS thread inside the pod's network namespace: sockets
// created by fn belong to the pod (InNetns).
func (p *Pod) In(fn func() error) error { return InNetns(p.NS, fn) }

// InNetns runs fn on an OS thread inside the named network namespace
// (/run/netns/NAME). The thread returns to its namespace afterwards; a
// thread that cannot is left locked so that Go discards it. (Discarding
// threads routinely would be wrong: a daemon started with Pdeathsig from a
// thread that exits is killed with it.)
func InNetns(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := openNS("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer func() { _ = unix.Close(orig) }()
		f, err := openNS("/run/netns/" + name)
		if err != nil {
			errc <- err
			runtime.UnlockOSThread()
			return
		}
		defer func() { _ = unix.Close(f) }()
		if err := unix.Setns(f, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", name, err)
			runtime.UnlockOSThread()
			return
		}
		err = fn()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func openNS(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	return fd, nil
}

// HWAddr is the pod's MAC.
func (p *Pod) HWAddr() net.HardwareAddr {
	m, _ := net.ParseMAC(p.MAC)
	return m
}

// Ref is "namespace/name".
func (p *Pod) Ref() string { return p.Namespace + "/" + p.Name }
