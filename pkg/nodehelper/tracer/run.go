package tracer

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/version"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
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
	// ReplyTag, where set, follows the destination's answer to the probe
	// too, tagged with it (reply.go): a second tag, so that the answer's
	// copies and the probe's never see each other's packet.
	ReplyTag uint8
	// Rules names the policy rule behind a conjunction id (Antrea's agent,
	// where the plugin says one runs on the node); nil names none.
	Rules RuleNamer
	// Brief leaves OVS's trace text and the hop list out of the result
	// line's explanation (--brief).
	Brief bool
	// Cache, where set, is shared by the traces of one serve process:
	// what they read of the node and may share (NodeCache).
	Cache *NodeCache
}

// RuleNamer names the policy rule a conjunction id stands for, met in the
// named table.
type RuleNamer interface {
	RuleOf(ctx context.Context, conj uint32, table string) (antreaagent.Rule, error)
}

// session is what a trace keeps open.
type session struct {
	c  Common
	br *ovsdb.Bridge
	// node is every bridge of the node, as OVSDB held them when the
	// trace began.
	node *ovsdb.Node
	of   *openflow.Session
	// mgmt is the management socket of's connection goes to.
	mgmt  string
	ovs   ofproto.Client
	names Namer
	// tables are the bridge's own table names (TABLE_FEATURES), whatever
	// names hops.
	tables TableNames
	// hostMark is the pkt_mark a probe from the node carries as the
	// node's own packets do (hostMark in nodesource.go); continuations
	// restore it where they clear their own mark.
	hostMark uint32
	// naming says why hops carry table numbers only, where they do on a
	// pipeline that has names of its own (OVN's southbound unreadable).
	naming string
	// ovnRemote is the node's ovn-remote, "" where OVN does not run.
	ovnRemote string
	cookie    uint64
	ctlID     uint16
	start     time.Time
	// steps time the setup up to the ready line (timed), from stepped;
	// readied: the ready line has gone, later steps are not kept.
	steps   []report.Step
	stepped time.Time
	readied bool
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
	// lookups are the rule lookups started (rulenames.go), all under
	// rulesCtx.
	lookups     map[uint32]*ruleLookup
	rulesCtx    context.Context
	rulesCancel context.CancelFunc
	// want, where set, tells the packet the trace follows (an answer)
	// instead of the probe.
	want func(frame []byte) bool
	// answer is what the answer the trace follows says.
	answer *report.Answer
	// extraCatch, on an answer's trace, takes more catch flows while it
	// waits (ReplyRun.ArmTranslated, ReplyRun.ArmMovedPort); nil elsewhere.
	extraCatch chan catchRequest
	// translated, on a probe's trace, is told of the probe as each
	// continuation pauses it (a source translated in the pipeline, or a
	// source port conntrack moved, arms the answer's catch there too);
	// nil where nobody listens (no answer is followed).
	translated func(frame []byte)
	// srcTranslated: the probe's source was seen translated here (SNAT
	// in the pipeline, as a gateway router's or a hairpin's).
	srcTranslated bool
	// unfollowed says why an answer's trace stopped following the
	// answer before it came (ReplyRun.after, from the probe's goroutine).
	unfollowed atomic.Pointer[string]
	// keptBack: the probe was not let go on to its destination (a
	// hairpin, see extend): nothing can answer it.
	keptBack bool
	// hostAddrs reads the node's addresses on a port's host interface
	// (ToOwnAddress).
	hostAddrs HostAddrs
	// kernel watches the node's kernel for the connection the probe
	// starts there, where it leaves OVS into the node's own stack
	// (kernelnat.go); kernelConn is the one it saw made, deleted at
	// cleanup.
	kernel     *kernelCT
	kernelConn *ctTuple
	// stack watches the uplink bridge an answer leaves by after the
	// node's stack (stackexit.go), on the answer's trace of a probe
	// that came in through it.
	stack *stackExit
	// catches holds the answer's catch keys the trace took (catchkeys.go),
	// let go at cleanup.
	catches heldCatches
	// removed, where set, hears of the trace's removed flows for it, and
	// unhear stops that (removals.go); else its own connection does.
	removed <-chan openflow.FlowRemoved
	unhear  func()
}

// trace asks OVS for its trace of frame entering the bridge with the
// pipeline metadata in md ("in_port=3,..."). It describes the frame as a
// flow instead of handing OVS the packet (see probe.TraceFlow).
func (s *session) trace(ctx context.Context, md string, frame []byte) (ofproto.Trace, error) {
	f, err := probe.TraceFlow(frame)
	if err != nil {
		return ofproto.Trace{}, err
	}
	t, err := s.ovs.Trace(ctx, s.c.Bridge, md+","+f, nil)
	if err == nil {
		s.warmRules(t)
	}
	return t, err
}

// isProbe tells the probe from other packets carrying its tag.
func (s *session) isProbe(frame []byte) bool {
	if s.want != nil {
		return s.want(frame)
	}
	sum, err := probe.Decode(frame)
	if err != nil {
		return false
	}
	port := s.probeSrcPort
	if s.probeSrcIP.IsValid() && sum.DstIP != s.probeSrcIP {
		// The pipeline translated the probe's source (a gateway
		// router's SNAT), its port too (OVN-Kubernetes' picks one at
		// random in 32768-60999), or its port alone: a DNAT whose
		// answer's tuple a tracked connection holds already (an earlier
		// probe from the same port, in TIME_WAIT) moves the source port
		// (OVS's conntrack, as the kernel's). Tag and mark tell it
		// still, and a reply goes back to the probe's source.
		port = 0
	}
	return sum.IsProbe(s.c.Tag, s.c.Mark, port)
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
	if !dscp.ValidTag(c.Tag) {
		return nil, setupErr("tag %d out of range %s", c.Tag, dscp.TagRange)
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	s := &session{c: c, start: time.Now(), hostAddrs: interfaceAddrs}
	s.stepped = s.start
	node, err := c.Cache.node(ctx, "unix:"+filepath.Join(c.Rundir, "db.sock"))
	if err != nil {
		return nil, setupErr("%w", err)
	}
	s.node = node
	s.timed("ovsdb snapshot")
	if s.br, err = node.Bridge(c.Bridge); err != nil {
		return nil, setupErr("%w", err)
	}
	s.ovnRemote = node.ExternalIDs["ovn-remote"]
	sock, err := ofproto.FindSocket(c.Rundir)
	if err != nil {
		return nil, setupErr("%w", err)
	}
	s.ovs = ofproto.Client{Socket: sock, Conns: c.Cache.ctlConns(sock)}
	if err := s.dial(ctx); err != nil {
		return nil, err
	}
	s.timed("openflow connect")
	tables, err := c.Cache.tableNames(ctx, c.Rundir+"\x00"+c.Bridge, func(ctx context.Context) (TableNames, error) { return readTableNames(ctx, s.of) })
	if err != nil {
		s.of.Close()
		return nil, setupErr("%w", err)
	}
	s.names, s.tables = tables, tables
	s.timed("table names")
	if s.ovnRemote != "" {
		s.names, s.naming = readOVNNames(ctx, c.Cache, tables, s.ovnRemote, c.Logf)
		s.timed("ovn names")
	}
	return s, nil
}

// timed ends a step of the setup: the time since the last one ended (or
// the session opened) goes to the ready line under name. Steps after the
// ready line (a continuation's) are not kept: the ready line has gone.
func (s *session) timed(name string) {
	if s.readied {
		return
	}
	now := time.Now()
	s.steps = append(s.steps, report.Step{Step: name, Micros: now.Sub(s.stepped).Microseconds()})
	s.stepped = now
}

// beside opens the session of another trace on s's bridge (the answer's,
// with c): it shares what s read of the node (the bridge, the table and
// OVN names, OVS's control socket), which neither changes, and has a
// cookie, controller id and OpenFlow connection of its own.
func (s *session) beside(ctx context.Context, c Common) (*session, error) {
	if !dscp.ValidTag(c.Tag) {
		return nil, setupErr("tag %d out of range %s", c.Tag, dscp.TagRange)
	}
	b := &session{c: c, start: time.Now(), hostAddrs: s.hostAddrs, br: s.br, ovs: s.ovs,
		names: s.names, tables: s.tables, naming: s.naming, ovnRemote: s.ovnRemote}
	b.stepped = b.start
	if err := b.dial(ctx); err != nil {
		return nil, err
	}
	return b, nil
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
	defer s.catches.release()
	if s.unhear != nil {
		defer s.unhear()
	}
	s.wanted = nil
	s.stopRules()
	s.forgetKernelConn()
	s.closeStackExit()
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
	if err == nil && s.c.Cache != nil {
		// Its flows are gone and every request answered: the next
		// trace on the bridge may take the connection.
		s.c.Cache.putConn(s.mgmt, idleConn{of: s.of, quiet: s.removed != nil})
	} else {
		s.of.Close()
	}
	_ = s.c.Out.Write(report.Line{Type: report.TypeCleanup, Cleanup: &c})
}

func (s *session) ready(role report.Role, flows int, port, match string) error {
	s.timed("other")
	s.readied = true
	return s.c.Out.Write(report.Line{Type: report.TypeReady, Ready: &report.Ready{
		Node: s.c.Node, HelperVersion: version.Version, Mode: role, Bridge: s.c.Bridge, Tag: s.c.Tag,
		Cookie: fmt.Sprintf("%#x", s.cookie), ControllerID: s.ctlID, Flows: flows,
		SourcePort: port, PortMatch: match, Naming: s.naming, Setup: s.steps,
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
	// SourceTranslated: the probe's source was translated on this node's
	// pipeline (SNAT), so its answer comes back to another address.
	SourceTranslated bool
	// KeptBack: the helper did not let the probe go on to its destination
	// (a hairpin it does not resume), so nothing answers it.
	KeptBack bool
}
