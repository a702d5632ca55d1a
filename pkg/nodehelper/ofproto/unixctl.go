package ofproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Client calls ovs-vswitchd's unixctl commands over its control socket.
type Client struct {
	// Socket is the control socket path (RUNDIR/ovs-vswitchd.PID.ctl).
	Socket string
	// Conns, where set, keeps the connections of the Clients that share
	// it between their calls; without it each call has a connection of
	// its own.
	Conns *Conns
}

// FindSocket locates ovs-vswitchd's control socket in rundir: from the
// pidfile when it is there (addressing the socket by path works without
// sharing the host's PID namespace), else the only ovs-vswitchd.*.ctl.
func FindSocket(rundir string) (string, error) {
	if b, err := os.ReadFile(filepath.Join(rundir, "ovs-vswitchd.pid")); err == nil { //nolint:gosec // rundir is the operator's OVS run directory
		p := filepath.Join(rundir, "ovs-vswitchd."+strings.TrimSpace(string(b))+".ctl")
		if _, err := os.Stat(p); err == nil { //nolint:gosec // a path inside the operator's OVS run directory
			return p, nil
		}
	}
	m, _ := filepath.Glob(filepath.Join(rundir, "ovs-vswitchd.*.ctl"))
	if len(m) == 1 {
		return m[0], nil
	}
	if p := filepath.Join(rundir, "ovs-vswitchd.ctl"); fileExists(p) {
		return p, nil
	}
	if len(m) > 1 {
		return "", fmt.Errorf("several ovs-vswitchd control sockets in %s (%s) and no matching pidfile", rundir, strings.Join(m, ", "))
	}
	return "", fmt.Errorf("no ovs-vswitchd control socket in %s: is ovs-vswitchd running and is --ovs-rundir its run directory?", rundir)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

type request struct {
	Method string   `json:"method"`
	Params []string `json:"params"`
	ID     int      `json:"id"`
}

type response struct {
	Result *string          `json:"result"`
	Error  *json.RawMessage `json:"error"`
	ID     int              `json:"id"`
}

// Call runs one unixctl command and returns its text.
func (c Client) Call(ctx context.Context, method string, params ...string) (string, error) {
	if params == nil {
		params = []string{}
	}
	for {
		cc, reused, err := c.Conns.take(ctx, c.Socket)
		if err != nil {
			return "", err
		}
		text, answered, err := cc.call(ctx, method, params)
		if answered {
			// A whole reply was read: the connection is in step.
			c.Conns.put(cc)
			return text, err
		}
		_ = cc.conn.Close()
		// An idle connection that ovs-vswitchd closed meanwhile fails
		// before any reply: the commands the helper calls only read, so
		// it asks again on a new one.
		if reused && ctx.Err() == nil {
			continue
		}
		return "", err
	}
}

// ctlConn is one connection to the control socket.
type ctlConn struct {
	conn net.Conn
	dec  *json.Decoder
	// id is the last request's id: a reply must carry it.
	id int
}

// call sends one request and reads its reply; answered says whether a
// whole reply to it was read (err is then the command's own error).
func (cc *ctlConn) call(ctx context.Context, method string, params []string) (string, bool, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(10 * time.Second)
	}
	_ = cc.conn.SetDeadline(dl)
	cc.id++
	if err := json.NewEncoder(cc.conn).Encode(request{Method: method, Params: params, ID: cc.id}); err != nil {
		return "", false, fmt.Errorf("%s: %w", method, err)
	}
	var r response
	if err := cc.dec.Decode(&r); err != nil {
		return "", false, fmt.Errorf("%s: read reply: %w", method, err)
	}
	if r.ID != cc.id {
		return "", false, fmt.Errorf("%s: reply to request %d, want %d", method, r.ID, cc.id)
	}
	_ = cc.conn.SetDeadline(time.Time{})
	if r.Error != nil && string(*r.Error) != "null" {
		var msg string
		if json.Unmarshal(*r.Error, &msg) != nil {
			msg = string(*r.Error)
		}
		return "", true, fmt.Errorf("%s: %s", method, strings.TrimSpace(msg))
	}
	if r.Result == nil {
		return "", true, errors.New(method + ": empty reply")
	}
	return *r.Result, true, nil
}

// Conns keeps idle connections to a control socket between calls: a
// matrix's traces call ovs-vswitchd several times each, and accepting a
// connection per call was 2% of its main thread's time in the lab. The
// zero value is ready; Close closes the idle ones. A nil Conns keeps
// none.
type Conns struct {
	mu     sync.Mutex
	idle   []*ctlConn
	closed bool
}

// maxIdleCtl bounds the idle connections kept.
const maxIdleCtl = 8

// take returns an idle connection, or a new one (reused says which).
func (p *Conns) take(ctx context.Context, socket string) (*ctlConn, bool, error) {
	if p != nil {
		p.mu.Lock()
		if n := len(p.idle); n > 0 {
			cc := p.idle[n-1]
			p.idle = p.idle[:n-1]
			p.mu.Unlock()
			return cc, true, nil
		}
		p.mu.Unlock()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, false, fmt.Errorf("connect to ovs-vswitchd control socket: %w", err)
	}
	// Its first request has id 0, as ovs-appctl's does.
	return &ctlConn{conn: conn, dec: json.NewDecoder(conn), id: -1}, false, nil
}

// put keeps cc for the next call, or closes it.
func (p *Conns) put(cc *ctlConn) {
	if p == nil {
		_ = cc.conn.Close()
		return
	}
	p.mu.Lock()
	if p.closed || len(p.idle) >= maxIdleCtl {
		p.mu.Unlock()
		_ = cc.conn.Close()
		return
	}
	p.idle = append(p.idle, cc)
	p.mu.Unlock()
}

// Close closes the idle connections; those put back later are closed.
func (p *Conns) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, cc := range idle {
		_ = cc.conn.Close()
	}
}

// Trace runs ofproto/trace for a flow entering bridge ("in_port=3,tcp,...")
// and, when packet is not nil, that packet (an Ethernet frame) with the
// flow's metadata. It also reads the datapath's ports (dpif/show), since
// the trace's datapath actions name datapath port numbers; should that
// fail, Ports stays empty and the classifier reads the ports from the
// hops' own output actions instead, so the trace is still returned.
func (c Client) Trace(ctx context.Context, bridge, flow string, packet []byte) (Trace, error) {
	params := []string{bridge, flow}
	if packet != nil {
		params = append(params, fmt.Sprintf("%x", packet))
	}
	text, err := c.Call(ctx, "ofproto/trace", params...)
	if err != nil {
		return Trace{}, err
	}
	t := Parse(text, bridge)
	t.Ports, _ = c.DatapathPorts(ctx)
	return t, nil
}
