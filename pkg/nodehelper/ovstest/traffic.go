package ovstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Capture reads every frame on a pod's eth0 (AF_PACKET), to prove that a
// packet really reached the pod.
type Capture struct {
	fd int
}

// StartCapture opens a packet socket on the pod's eth0.
func (p *Pod) StartCapture() (*Capture, error) {
	var c Capture
	err := p.In(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			_ = unix.Close(fd)
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			_ = unix.Close(fd)
			return fmt.Errorf("bind packet socket: %w", err)
		}
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			_ = unix.Close(fd)
			return err
		}
		c.fd = fd
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// WaitFor returns the first incoming frame that match accepts, or false
// after timeout.
func (c *Capture) WaitFor(timeout time.Duration, match func(frame []byte) bool) ([]byte, bool) {
	buf := make([]byte, 65536)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if match(buf[:n]) {
			return append([]byte(nil), buf[:n]...), true
		}
	}
	return nil, false
}

// Close closes the socket.
func (c *Capture) Close() { _ = unix.Close(c.fd) }

// ServeTCP listens on the pod's port and accepts connections until ctx ends.
func (p *Pod) ServeTCP(ctx context.Context, port int) error {
	var ln net.Listener
	err := p.In(func() error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("ok\n"))
			_ = c.Close()
		}
	}()
	return nil
}

// DialTCP connects from the pod to addr and reads the server's greeting.
func (p *Pod) DialTCP(addr string, timeout time.Duration) error {
	return p.In(func() error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(timeout))
		b := make([]byte, 3)
		if _, err := c.Read(b); err != nil {
			return fmt.Errorf("read from %s: %w", addr, err)
		}
		if string(b) != "ok\n" {
			return errors.New("unexpected greeting")
		}
		return nil
	})
}

// UDPEcho serves UDP echo on the pod's port until ctx ends.
func (p *Pod) UDPEcho(ctx context.Context, port int) error { return p.UDPEchoAfter(ctx, port, 0) }

// UDPEchoAfter serves UDP echo on the pod's port until ctx ends, each
// answer delay after its datagram came: a workload slow to answer.
// A negative delay takes the datagrams and answers none.
func (p *Pod) UDPEchoAfter(ctx context.Context, port int, delay time.Duration) error {
	var pc net.PacketConn
	if err := p.In(func() error {
		var err error
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		return err
	}
	go func() { <-ctx.Done(); _ = pc.Close() }()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			switch {
			case err != nil:
				return
			case delay == 0:
				_, _ = pc.WriteTo(buf[:n], from)
			case delay > 0:
				answer := append([]byte(nil), buf[:n]...)
				time.AfterFunc(delay, func() { _, _ = pc.WriteTo(answer, from) })
			}
		}
	}()
	return nil
}

// Pinger sends numbered UDP echo requests from a pod and counts replies,
// a ping that needs no ping binary. It sends on its interval whatever the
// replies do (one slow reply does not hold the next pings back) and keeps
// when each ping went, so that a loss can be placed in time.
type Pinger struct {
	// Sent and Received are set once the pinger has stopped (Wait).
	Sent, Received int
	mu             sync.Mutex
	sentAt         []time.Time // by sequence number
	answered       []bool
	done           chan struct{}
}

// pingGrace is how long a reply may take: one counts however late it is
// within it, so that a busy CI machine is not mistaken for a lossy network.
const pingGrace = time.Second

// StartPinger pings addr (UDP echo) every interval until ctx ends, then
// waits up to pingGrace for the replies still due.
func (p *Pod) StartPinger(ctx context.Context, addr string, interval time.Duration) (*Pinger, error) {
	var conn net.Conn
	if err := p.In(func() error {
		var err error
		conn, err = net.Dial("udp", addr)
		return err
	}); err != nil {
		return nil, err
	}
	pg := &Pinger{done: make(chan struct{})}
	replies := make(chan struct{})
	go pg.readReplies(conn, replies)
	go func() {
		defer close(pg.done)
		pg.send(ctx, conn, interval)
		pg.mu.Lock()
		due := time.Now() // no ping went: nothing is due
		if n := len(pg.sentAt); n > 0 {
			due = pg.sentAt[n-1].Add(pingGrace)
		}
		pg.mu.Unlock()
		_ = conn.SetReadDeadline(due)
		<-replies
		_ = conn.Close()
		pg.mu.Lock()
		defer pg.mu.Unlock()
		pg.Sent = len(pg.sentAt)
		for _, ok := range pg.answered {
			if ok {
				pg.Received++
			}
		}
	}()
	return pg, nil
}

func (pg *Pinger) send(ctx context.Context, conn net.Conn, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pg.mu.Lock()
		seq := len(pg.sentAt)
		pg.sentAt = append(pg.sentAt, time.Now())
		pg.answered = append(pg.answered, false)
		pg.mu.Unlock()
		_, _ = fmt.Fprintf(conn, "ping %d", seq)
	}
}

// readReplies marks the pings answered until the connection's read
// deadline or an error, then closes done.
func (pg *Pinger) readReplies(conn net.Conn, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 64)
	for {
		n, err := conn.Read(buf)
		var ne net.Error
		if errors.Is(err, net.ErrClosed) || errors.As(err, &ne) && ne.Timeout() {
			return
		}
		if err != nil {
			continue // an ICMP error for one ping (the echo server not up yet)
		}
		var seq int
		if _, err := fmt.Sscanf(string(buf[:n]), "ping %d", &seq); err != nil {
			continue
		}
		pg.mu.Lock()
		if seq >= 0 && seq < len(pg.answered) && time.Since(pg.sentAt[seq]) <= pingGrace {
			pg.answered[seq] = true
		}
		pg.mu.Unlock()
	}
}

// Wait waits for the pinger to stop after its context ended.
func (pg *Pinger) Wait() { <-pg.done }

// Unanswered says when each unanswered ping went, as offsets from
// since; call it after Wait.
func (pg *Pinger) Unanswered(since time.Time) []time.Duration {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	var lost []time.Duration
	for i, ok := range pg.answered {
		if !ok {
			lost = append(lost, pg.sentAt[i].Sub(since))
		}
	}
	return lost
}
