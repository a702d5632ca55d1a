package engine

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/version"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/antreaagent"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/openflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovsdb"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/probe"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// Exit codes, as DESIGN.md's CI contract says.
const (
	ExitOK      = 0 // delivered, forwarded into a tunnel, or left the network
	ExitDropped = 2
	ExitTimeout = 3
	ExitSetup   = 4
)

// SetupError marks a failure before the trace could start (exit code 4).
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

func setupErr(format string, args ...any) error {
	return &SetupError{Err: fmt.Errorf(format, args...)}
}

// Common is what both modes need.
type Common struct {
	// Rundir is OVS's run directory: db.sock, BRIDGE.mgmt, ovs-vswitchd.PID.ctl.
	Rundir string
	Bridge string
	Node   string
	Tag    uint8
	// Mark is the probe's IPv4 identification / IPv6 flow label (0: the
	// tag's default, probe.Mark): with a random mark per trace, a pod that
	// knows the tag still cannot forge a packet counted as the probe.
	Mark uint32
	// Timeout bounds the trace; it is also the flows' hard_timeout, so that
	// a helper killed mid-trace leaves nothing behind for longer.
	Timeout time.Duration
	Out     *report.Writer
	Logf    func(format string, args ...any)
	// Random supplies the cookie's and controller id's random bits.
	Random func() uint32
	// Rules names the policy rule behind a conjunction id (Antrea's agent,
	// where the plugin says one runs on the node); nil names none.
	Rules RuleNamer
}

// RuleNamer names the policy rule a conjunction id stands for, met in the
// named table.
type RuleNamer interface {
	RuleOf(ctx context.Context, conj uint32, table string) (antreaagent.Rule, error)
}

// session is what a trace keeps open.
type session struct {
	c     Common
	br    *ovsdb.Bridge
	of    *openflow.Session
	ovs   ofproto.Client
	names Namer
	// naming says why hops carry table numbers only, where they do on a
	// pipeline that has names of its own (OVN's southbound unreadable).
	naming string
	// ovnRemote is the node's ovn-remote, "" where OVN does not run.
	ovnRemote string
	cookie    uint64
	ctlID     uint16
	start     time.Time
	// foreign counts packet-ins that were not this trace's.
	foreign int
	// probeSrcPort is the probe's TCP/UDP source port, 0 where unknown
	// (on a receiver).
	probeSrcPort uint16
	// probeSrcIP is the probe's source address, where this node sent it.
	probeSrcIP netip.Addr
	// ignored counts tagged packets that were not the probe (a reply
	// whose DSCP the replier copied from the probe).
	ignored int
	// wanted holds the flows the trace wants in the bridge, by kind
	// (restore.go).
	wanted map[uint8][]sentFlow
	// installed counts the flows the trace added (install), for the
	// cleanup line.
	installed int
	// rulesUntil ends the time the trace gives c.Rules (antreaagent.Budget
	// from the first lookup).
	rulesUntil time.Time
	// hostAddrs reads the node's addresses on a port's host interface
	// (ToOwnAddress).
	hostAddrs HostAddrs
}

// trace asks OVS for its trace of frame entering the bridge with the
// pipeline metadata in md ("in_port=3,..."). It describes the frame as a
// flow instead of handing OVS the packet (see probe.TraceFlow).
func (s *session) trace(ctx context.Context, md string, frame []byte) (ofproto.Trace, error) {
	f, err := probe.TraceFlow(frame)
	if err != nil {
		return ofproto.Trace{}, err
	}
	return s.ovs.Trace(ctx, s.c.Bridge, md+","+f, nil)
}

// isProbe tells the probe from other packets carrying its tag.
func (s *session) isProbe(frame []byte) bool {
	sum, err := probe.Decode(frame)
	return err == nil && sum.IsProbe(s.c.Tag, s.c.Mark, s.probeSrcPort)
}

func (c Common) hardTimeout() uint16 {
	s := math.Ceil(c.Timeout.Seconds())
	if s < 1 {
		s = 1
	}
	if s > 65535 {
		s = 65535
	}
	return uint16(s)
}

func open(ctx context.Context, c Common) (*session, error) {
	if c.Tag == 0 || c.Tag > 63 {
		return nil, setupErr("tag %d out of range 1..63 (a DSCP value)", c.Tag)
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	s := &session{c: c, start: time.Now(), hostAddrs: interfaceAddrs}
	node, err := ovsdb.Snapshot(ctx, "unix:"+filepath.Join(c.Rundir, "db.sock"))
	if err != nil {
		return nil, setupErr("%w", err)
	}
	if s.br, err = node.Bridge(c.Bridge); err != nil {
		return nil, setupErr("%w", err)
	}
	s.ovnRemote = node.ExternalIDs["ovn-remote"]
	sock, err := ofproto.FindSocket(c.Rundir)
	if err != nil {
		return nil, setupErr("%w", err)
	}
	s.ovs = ofproto.Client{Socket: sock}
	r := c.Random()
	s.cookie = TraceCookie(c.Tag, r)
	// Controller ids 1..0x7fff stay clear of 0, where CNIs' own packet-ins go.
	s.ctlID = uint16(r%0x7ffe) + 1 //nolint:gosec // bounded
	s.of, err = openflow.Dial(ctx, filepath.Join(c.Rundir, c.Bridge+".mgmt"), s.ctlID, c.Logf)
	if err != nil {
		return nil, setupErr("%w", err)
	}
	tables, err := readTableNames(ctx, s.of)
	if err != nil {
		s.of.Close()
		return nil, setupErr("%w", err)
	}
	s.names = tables
	if s.ovnRemote != "" {
		s.names, s.naming = readOVNNames(ctx, tables, s.ovnRemote, c.Logf)
	}
	return s, nil
}

func readTableNames(ctx context.Context, of *openflow.Session) (TableNames, error) {
	bodies, err := of.Multipart(ctx, openflow.TableFeaturesRequest(of.NextXid()))
	if err != nil {
		return nil, fmt.Errorf("read table names (TABLE_FEATURES): %w", err)
	}
	names := TableNames{}
	for _, b := range bodies {
		tn, err := openflow.DecodeTableFeatures(b)
		if err != nil {
			return nil, fmt.Errorf("read table names: %w", err)
		}
		for _, t := range tn {
			// OVS calls unnamed tables "table0", "table1", ...: no name.
			if t.Name != "" && t.Name != fmt.Sprintf("table%d", t.ID) {
				names[t.ID] = t.Name
			}
		}
	}
	return names, nil
}

// cleanup deletes every flow of the trace, counts what is left, and says
// so on a cleanup line: the last line of the helper's report, which tells
// the plugin that stopping the helper left nothing behind. It runs on
// every exit path; hard_timeout covers a helper that is killed.
func (s *session) cleanup() {
	s.wanted = nil
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	msg, err := openflow.DeleteByCookie(s.of.NextXid(), s.cookie, cookieMask)
	if err == nil {
		err = s.of.Send(msg)
	}
	if err == nil {
		err = s.of.Barrier(ctx)
	}
	left := -1
	if err == nil {
		left, err = s.countFlows(ctx)
	}
	c := report.Cleanup{Cookie: fmt.Sprintf("%#x", s.cookie), FlowsLeft: left, HardTimeout: int(s.c.hardTimeout()), FlowsInstalled: s.installed}
	if err != nil {
		c.Error = err.Error()
		s.c.Logf("cleanup: delete flows with cookie %#x/%#x: %v (they expire after %ds)", s.cookie, cookieMask, err, s.c.hardTimeout())
	}
	s.of.Close()
	_ = s.c.Out.Write(report.Line{Type: report.TypeCleanup, Cleanup: &c})
}

// countFlows counts every flow in the bridge with the trace's cookie.
func (s *session) countFlows(ctx context.Context) (int, error) {
	bodies, err := s.of.Multipart(ctx, openflow.FlowDescRequest(s.of.NextXid(), openflow.AllTables, s.cookie, cookieMask))
	if err != nil {
		return -1, fmt.Errorf("count the trace's flows: %w", err)
	}
	n := 0
	for _, b := range bodies {
		fds, err := openflow.DecodeFlowDescs(b)
		if err != nil {
			return -1, fmt.Errorf("count the trace's flows: %w", err)
		}
		n += len(fds)
	}
	return n, nil
}

// pipelineFlows counts the bridge's flows that belong to no trace: every
// flow (OpenFlow table statistics) less those whose cookie carries the
// traces' marker (cookieMarker), this trace's and others'.
func (s *session) pipelineFlows(ctx context.Context) (int, error) {
	bodies, err := s.of.Multipart(ctx, openflow.TableStatsRequest(s.of.NextXid()))
	if err != nil {
		return 0, err
	}
	total := 0
	for _, b := range bodies {
		ts, err := openflow.DecodeTableStats(b)
		if err != nil {
			return 0, err
		}
		for _, t := range ts {
			total += int(t.ActiveCount)
		}
	}
	bodies, err = s.of.Multipart(ctx, openflow.FlowDescRequest(s.of.NextXid(), openflow.AllTables, cookieMarker, markerMask))
	if err != nil {
		return 0, err
	}
	for _, b := range bodies {
		fds, err := openflow.DecodeFlowDescs(b)
		if err != nil {
			return 0, err
		}
		total -= len(fds)
	}
	return max(total, 0), nil
}

// flowsOf reads the flows of every table on the trace's path.
func (s *session) flowsOf(ctx context.Context, t ofproto.Trace) (map[uint8][]openflow.FlowDesc, error) {
	out := map[uint8][]openflow.FlowDesc{}
	for _, h := range t.Hops {
		if h.NoMatch {
			continue
		}
		if _, ok := out[h.Table]; ok {
			continue
		}
		bodies, err := s.of.Multipart(ctx, openflow.FlowDescRequest(s.of.NextXid(), h.Table, 0, 0))
		if err != nil {
			return nil, fmt.Errorf("read flows of table %d: %w", h.Table, err)
		}
		out[h.Table] = []openflow.FlowDesc{}
		for _, b := range bodies {
			fds, err := openflow.DecodeFlowDescs(b)
			if err != nil {
				return nil, fmt.Errorf("read flows of table %d: %w", h.Table, err)
			}
			out[h.Table] = append(out[h.Table], fds...)
		}
	}
	return out, nil
}

// install sends the plan's flows and waits for a barrier, so that an error
// names the flow and nothing is reported ready before OVS has the flows.
// Each flow asks OVS to say when it is removed, and the session remembers
// it, so that flows someone else deletes come back (see restore.go).
func (s *session) install(ctx context.Context, p Plan, revalidate bool) error {
	for _, m := range p.FlowMods {
		openflow.SetFlowModFlags(m, openflow.FlagSendFlowRem)
	}
	s.remember(p.FlowMods, time.Now())
	s.installed += len(p.FlowMods)
	return s.send(ctx, p.FlowMods, revalidate)
}

// send sends flow mods, waits for a barrier and, if revalidate, for OVS to
// have revalidated its datapath flow cache against them.
func (s *session) send(ctx context.Context, msgs [][]byte, revalidate bool) error {
	for _, m := range msgs {
		setXid(m, s.of.NextXid())
		if err := s.of.Send(m); err != nil {
			return err
		}
	}
	if err := s.of.Barrier(ctx); err != nil {
		return fmt.Errorf("install observation flows: %w", err)
	}
	if !revalidate {
		return nil
	}
	if err := s.revalidated(ctx); err != nil {
		return fmt.Errorf("wait for OVS to revalidate its flow cache: %w", err)
	}
	return nil
}

// revalidated returns once a whole revalidator round has run after the
// flows sent so far were in the tables.
//
// The barrier says the flow tables changed, not that the datapath's flow
// cache has caught up: a packet the datapath looks up (one arriving from a
// tunnel) would still hit a megaflow translated before the copies existed,
// which ignores the DSCP tag, until a revalidator round replaces it.
// revalidator/wait answers when the round running at the time of asking
// ends (OVS compares its dump sequence number), and that round may have
// begun before the flows were added. So: wait once, which ends that round;
// touch the flow table, which makes the revalidators start the next round
// at once instead of after max-revalidator (500 ms); wait again, which ends
// a round that began after the flows were in place. No probe is sent twice
// to make up for a stale cache: a second probe would reach the destination
// a second time.
func (s *session) revalidated(ctx context.Context) error {
	if _, err := s.ovs.Call(ctx, "revalidator/wait"); err != nil {
		return err
	}
	bump := openflow.NewFlow(s.of.NextXid(), 0, 0, s.cookie|kindBump, 1, openflow.PktMarkField(ownMark(markBump, s.c.Tag)), nil)
	s.installed++
	if err := s.of.Send(bump); err != nil {
		return err
	}
	if err := s.of.Barrier(ctx); err != nil {
		return err
	}
	_, err := s.ovs.Call(ctx, "revalidator/wait")
	if del, derr := openflow.DeleteByCookie(s.of.NextXid(), s.cookie|kindBump, ^uint64(0)); derr == nil {
		// Its hard timeout would remove it within a second; a trace's
		// flows are only the ones it reports.
		_ = s.of.Send(del)
	}
	return err
}

func setXid(m []byte, xid uint32) {
	m[4], m[5], m[6], m[7] = byte(xid>>24), byte(xid>>16), byte(xid>>8), byte(xid)
}

func (s *session) ready(role report.Role, flows int, port, match string) error {
	return s.c.Out.Write(report.Line{Type: report.TypeReady, Ready: &report.Ready{
		Node: s.c.Node, HelperVersion: version.Version, Mode: role, Bridge: s.c.Bridge, Tag: s.c.Tag,
		Cookie: fmt.Sprintf("%#x", s.cookie), ControllerID: s.ctlID, Flows: flows,
		SourcePort: port, PortMatch: match, Naming: s.naming,
	}})
}

// Outcome is how a trace ended on this node.
type Outcome struct {
	ExitCode int
	Result   report.NodeResult
	// ForeignPacketIns counts packet-ins that were not this trace's: with
	// its own controller id there should be none.
	ForeignPacketIns int
	// IgnoredPackets counts packets that carried the trace's tag but were
	// not its probe (a reply that copied the DSCP, a forgery without the
	// trace's mark): let go, never reported.
	IgnoredPackets int
}

// natTable names the table to which a destination translation seen at hop
// i is attributed: the hop OVS's trace shows doing the DNAT (nat(dst=...)),
// else the last group or conntrack action before hop i.
func (s *session) natTable(t ofproto.Trace, i int) string {
	for _, h := range t.Hops {
		for _, a := range h.Actions {
			if strings.Contains(a, "nat(dst=") {
				return s.names.NameHop(h).Where
			}
		}
	}
	for j := i - 1; j >= 0; j-- {
		for _, a := range t.Hops[j].Actions {
			if strings.HasPrefix(a, "group:") {
				return s.names.NameHop(t.Hops[j]).Where
			}
		}
	}
	for j := i - 1; j >= 0; j-- {
		for _, a := range t.Hops[j].Actions {
			if strings.HasPrefix(a, "ct(") {
				return s.names.NameHop(t.Hops[j]).Where
			}
		}
	}
	return s.names.NameHop(t.Hops[i]).Where
}

func lastTrue(b []bool) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] {
			return i
		}
	}
	return -1
}

func summary(t ofproto.Trace, final int, v Verdict, names Namer) string {
	if final < 0 {
		return "OVS's trace has no hops"
	}
	h := t.Hops[final]
	where := names.NameHop(h).Where
	port := v.PortName
	if v.Port != nil {
		port = v.Port.Name
	}
	switch {
	case v.Open:
		return fmt.Sprintf("the packet went on after %s into a recirculation that neither OVS's trace nor the helper followed further (%s)", where, v.Reason)
	case v.Action == report.ActionDelivered && v.Port != nil && v.Port.PodName() == "":
		return fmt.Sprintf("delivered to the node itself through port %s by %s (%s)", port, where, v.Reason)
	case v.Action == report.ActionDelivered && v.Port != nil:
		return fmt.Sprintf("delivered to pod %s (port %s) by %s", v.Port.PodName(), port, where)
	case v.Action == report.ActionForwarded && port != "":
		return fmt.Sprintf("forwarded into tunnel %s to %s by %s", port, v.TunnelDst, where)
	case v.Action == report.ActionForwardedOutOfNetwork && port != "":
		return fmt.Sprintf("left the pod network through port %s by %s", port, where)
	case v.Action == report.ActionForwardedOutOfNetwork:
		return fmt.Sprintf("left the pod network by %s", where)
	case v.Action == report.ActionRejected:
		return fmt.Sprintf("rejected in %s by flow %q priority %d cookie %#x (%s)", where, h.Match, h.Priority, h.Cookie, v.Reason)
	case v.Action == report.ActionDropped && h.NoMatch:
		return fmt.Sprintf("dropped in %s: no flow matches (the pipeline ends here)", where)
	case v.Action == report.ActionDropped:
		return fmt.Sprintf("dropped in %s by flow %q priority %d cookie %#x", where, h.Match, h.Priority, h.Cookie)
	}
	return fmt.Sprintf("%s in %s", v.Action, where)
}

func newTimer(d time.Duration) *time.Timer { return time.NewTimer(d) }
