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
	"time"
)

// Client calls ovs-vswitchd's unixctl commands over its control socket.
type Client struct {
	// Socket is the control socket path (RUNDIR/ovs-vswitchd.PID.ctl).
	Socket string
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
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return "", fmt.Errorf("connect to ovs-vswitchd control socket: %w", err)
	}
	defer func() { _ = conn.Close() }()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(10 * time.Second)
	}
	_ = conn.SetDeadline(dl)
	if params == nil {
		params = []string{}
	}
	if err := json.NewEncoder(conn).Encode(request{Method: method, Params: params}); err != nil {
		return "", fmt.Errorf("%s: %w", method, err)
	}
	var r response
	if err := json.NewDecoder(conn).Decode(&r); err != nil {
		return "", fmt.Errorf("%s: read reply: %w", method, err)
	}
	if r.Error != nil && string(*r.Error) != "null" {
		var msg string
		if json.Unmarshal(*r.Error, &msg) != nil {
			msg = string(*r.Error)
		}
		return "", fmt.Errorf("%s: %s", method, strings.TrimSpace(msg))
	}
	if r.Result == nil {
		return "", errors.New(method + ": empty reply")
	}
	return *r.Result, nil
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
