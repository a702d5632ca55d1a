//go:build integration

package tracer

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovstest"
)

// The kernel's connection tracking as the helper reads it, against a real
// kernel: two network namespaces joined by a veth pair, the first
// translating UDP to port 9 to another of its addresses (iptables SNAT),
// as a node's masquerade translates a pod's packet on its way out.
func TestIntegrationKernelConntrack(t *testing.T) {
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("iptables is needed (make deps installs it): %v", err)
	}
	a, b := fmt.Sprintf("tfct-a-%d", unix.Getpid()), fmt.Sprintf("tfct-b-%d", unix.Getpid())
	sh(t, "ip netns add "+a+" && ip netns add "+b)
	t.Cleanup(func() { _ = exec.Command("sh", "-c", "ip netns del "+a+"; ip netns del "+b).Run() })
	sh(t, strings.Join([]string{
		"ip -n " + a + " link add ct0 type veth peer name ct1 netns " + b,
		"ip -n " + a + " addr add 10.250.0.1/24 dev ct0", "ip -n " + a + " addr add 10.250.0.77/24 dev ct0",
		"ip -n " + b + " addr add 10.250.0.2/24 dev ct1",
		"ip -n " + a + " link set ct0 up", "ip -n " + b + " link set ct1 up",
		"ip netns exec " + a + " iptables -t nat -A POSTROUTING -p udp --dport 9 -j SNAT --to-source 10.250.0.77",
	}, " && "))
	orig := ctTuple{Proto: 17, Src: netip.MustParseAddr("10.250.0.1"), Dst: netip.MustParseAddr("10.250.0.2"), SrcPort: 61234, DstPort: 9}
	err := ovstest.InNetns(a, func() error {
		k, err := openKernelCT()
		if err != nil {
			return err
		}
		defer k.Close()
		if _, err := ctQuery(ctMsgGet, orig); !errors.Is(err, errCTNotFound) {
			return fmt.Errorf("before the packet: %w, want errCTNotFound", err)
		}
		c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(orig.Src, orig.SrcPort)), net.UDPAddrFromAddrPort(netip.AddrPortFrom(orig.Dst, orig.DstPort)))
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		if _, err := c.Write([]byte("probe")); err != nil {
			return err
		}
		e, made, err := k.probeConn(orig, time.Now().Add(5*time.Second))
		if err != nil || !made {
			return fmt.Errorf("the connection: %+v, seen made %v: %w", e, made, err)
		}
		if !e.SourceTranslated() || e.Reply.Dst != netip.MustParseAddr("10.250.0.77") || e.Reply.Src != orig.Dst {
			return fmt.Errorf("connection %s answered as %s: want the answer to 10.250.0.77", e.Orig, e.Reply)
		}
		if _, err := ctQuery(ctMsgDelete, e.Orig); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		if _, err := ctQuery(ctMsgGet, orig); !errors.Is(err, errCTNotFound) {
			return fmt.Errorf("after the delete: %w, want errCTNotFound", err)
		}
		// A connection that was never made is not waited for past the
		// deadline, and is not found.
		other := orig
		other.SrcPort++
		start := time.Now()
		if _, made, err := k.probeConn(other, time.Now().Add(200*time.Millisecond)); !errors.Is(err, errCTNotFound) || made || time.Since(start) > 3*time.Second {
			return fmt.Errorf("a connection never made: seen %v after %s: %w", made, time.Since(start), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func sh(t *testing.T, script string) {
	t.Helper()
	if out, err := exec.Command("sh", "-ec", script).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}
