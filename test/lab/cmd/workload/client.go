package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Outcome is what real traffic met: the oracle that e2e tests hold a
// trace's verdict against. Each has its own exit code so that a caller can
// tell them apart without parsing, and a `result=` line for one that parses.
type Outcome string

// The outcomes of a client, and their exit codes (1 is left to usage and
// other errors, which say nothing about the network).
const (
	Served   Outcome = "served"    // exit 0: the server answered
	Refused  Outcome = "refused"   // exit 2: a TCP RST or an ICMP destination unreachable came back
	TimedOut Outcome = "timed-out" // exit 3: nothing came back before -timeout
)

func (o Outcome) exitCode() int {
	switch o {
	case Served:
		return 0
	case Refused:
		return 2
	default:
		return 3
	}
}

// classify maps a client's error to an outcome. A RST gives ECONNREFUSED;
// an ICMP unreachable gives ECONNREFUSED (port unreachable) or
// EHOSTUNREACH/ENETUNREACH (host, network or administratively prohibited),
// all of them an answer that the packet was turned away. Anything else
// (DNS, a bad URL) is not an outcome of the network: ok is false.
func classify(err error) (o Outcome, ok bool) {
	if err == nil {
		return Served, true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return TimedOut, true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ECONNRESET, syscall.EACCES} {
		if errors.Is(err, e) {
			return Refused, true
		}
	}
	return "", false
}

// report prints the machine-readable line and returns the exit code. The
// line is the last one on stdout: `result=OUTCOME proto=P dst=D time=T`,
// plus `error="..."` when the network said no.
func report(proto, dst string, start time.Time, err error) int {
	o, ok := classify(err)
	if !ok {
		fmt.Fprintln(os.Stderr, "workload:", err)
		return 1
	}
	line := fmt.Sprintf("result=%s proto=%s dst=%s time=%s", o, proto, dst, time.Since(start).Round(time.Millisecond))
	if err != nil {
		line += " error=" + strconv.Quote(err.Error())
	}
	fmt.Println(line)
	return o.exitCode()
}

func clientFlags(name string) (*flag.FlagSet, *time.Duration) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return fs, fs.Duration("timeout", 3*time.Second, "give up (timed-out) after this long")
}

// get is an HTTP GET: served when any HTTP answer came back (the status is
// the server's business; the network delivered), with the body on stdout.
func get(args []string) int {
	fs, timeout := clientFlags("get")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: workload get [-timeout D] URL")
		return 1
	}
	start := time.Now()
	// No proxy from the environment: the oracle is the direct path.
	c := &http.Client{Timeout: *timeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := c.Get(fs.Arg(0))
	if err == nil {
		body, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		fmt.Print(string(body))
		if !strings.HasSuffix(string(body), "\n") {
			fmt.Println()
		}
		err = rerr
	}
	return report("tcp", fs.Arg(0), start, err)
}

// udp sends MSG and waits for its echo. A connected UDP socket turns an ICMP
// port unreachable into ECONNREFUSED on the next read: that is "refused".
func udp(args []string) int {
	fs, timeout := clientFlags("udp")
	if err := fs.Parse(args); err != nil || fs.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: workload udp [-timeout D] HOST:PORT MSG")
		return 1
	}
	start := time.Now()
	err := func() error {
		c, err := net.Dial("udp", fs.Arg(0)) //nolint:gosec // a test client dials the address it is given
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		if err := c.SetDeadline(start.Add(*timeout)); err != nil {
			return err
		}
		if _, err := c.Write([]byte(fs.Arg(1))); err != nil {
			return err
		}
		buf := make([]byte, 65535)
		n, err := c.Read(buf)
		if err == nil {
			fmt.Println(string(buf[:n]))
		}
		return err
	}()
	return report("udp", fs.Arg(0), start, err)
}

// ping sends one ICMP echo request over a raw socket and waits for the
// reply, or for a destination unreachable that quotes the request.
//
// Why a raw socket and not an unprivileged ping socket: containerd gives
// every container CAP_NET_RAW by default, which is all a raw ICMP socket
// needs, whereas a ping socket needs net.ipv4.ping_group_range to cover the
// caller's group, and a pod's network namespace starts with "1 0" (nobody)
// unless the pod sets that sysctl. A ping socket also reports ICMP errors
// only through IP_RECVERR; the raw socket sees them as packets.
func ping(args []string) int {
	fs, timeout := clientFlags("ping")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: workload ping [-timeout D] IP")
		return 1
	}
	dst := net.ParseIP(fs.Arg(0)).To4()
	if dst == nil {
		fmt.Fprintln(os.Stderr, "workload: ping needs an IPv4 address, got", fs.Arg(0))
		return 1
	}
	start := time.Now()
	err := echo(dst, start.Add(*timeout))
	return report("icmp", dst.String(), start, err)
}

// errUnreachable is what a destination unreachable about our request
// becomes; it unwraps to EHOSTUNREACH so that classify calls it refused.
type errUnreachable struct{ code uint8 }

func (e errUnreachable) Error() string {
	return fmt.Sprintf("ICMP destination unreachable, code %d", e.code)
}
func (e errUnreachable) Unwrap() error { return syscall.EHOSTUNREACH }

func echo(dst net.IP, deadline time.Time) error {
	// Go strips the IPv4 header from what an ip4 socket reads.
	c, err := net.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	id, seq := uint16(rand.IntN(1<<16)), uint16(1) //nolint:gosec // an echo id, not a secret
	req, err := echoRequest(id, seq)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(req, &net.IPAddr{IP: dst}); err != nil {
		return err
	}
	buf := make([]byte, 65535)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return err
		}
		if got := matchEcho(buf[:n], id, seq); got != nil {
			return got.err(from, dst)
		}
	}
}

func echoRequest(id, seq uint16) ([]byte, error) {
	sb := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{ComputeChecksums: true},
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: id, Seq: seq},
		gopacket.Payload("lab-workload"))
	return sb.Bytes(), err
}

// echoMatch is an ICMP message about our request: its reply, or an error
// that quotes it.
type echoMatch struct {
	reply bool
	code  uint8
}

func (m *echoMatch) err(from net.Addr, dst net.IP) error {
	if m.reply {
		if a, ok := from.(*net.IPAddr); ok && !a.IP.Equal(dst) {
			return fmt.Errorf("echo reply from %s, not %s", a.IP, dst)
		}
		return nil
	}
	return errUnreachable{code: m.code}
}

// matchEcho reads one ICMP message (no IP header). A raw socket sees every
// ICMP message to the pod, so only ours count: an echo reply with our id and
// sequence, or a destination unreachable quoting an echo request with them.
func matchEcho(b []byte, id, seq uint16) *echoMatch {
	p := gopacket.NewPacket(b, layers.LayerTypeICMPv4, gopacket.Default)
	icmp, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if icmp == nil {
		return nil
	}
	switch icmp.TypeCode.Type() {
	case layers.ICMPv4TypeEchoReply:
		if icmp.Id == id && icmp.Seq == seq {
			return &echoMatch{reply: true}
		}
	case layers.ICMPv4TypeDestinationUnreachable:
		// The quoted datagram: its IP header and at least 8 bytes of ICMP.
		q := gopacket.NewPacket(icmp.Payload, layers.LayerTypeIPv4, gopacket.Default)
		inner, _ := q.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		if inner != nil && inner.TypeCode.Type() == layers.ICMPv4TypeEchoRequest && inner.Id == id && inner.Seq == seq {
			return &echoMatch{code: icmp.TypeCode.Code()}
		}
	}
	return nil
}
