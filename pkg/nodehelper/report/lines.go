package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// The helper's stdout is a stream of JSON lines, one object a line, each an
// envelope with the schema version and a type:
//
//	{"v":1,"type":"ready","time":"...","ready":{...}}          flows installed; inject now
//	{"v":1,"type":"observation","time":"...","observation":{...},"hop":{...}}
//	{"v":1,"type":"result","time":"...","result":{...},"explanation":{...},"exitCode":0}
//	{"v":1,"type":"error","time":"...","error":{"code":"setup","message":"..."}}
//	{"v":1,"type":"cleanup","time":"...","cleanup":{"cookie":"0x...","flowsLeft":0}}
//	{"v":1,"type":"serving","time":"...","serving":{...}}         serve: reading commands now
//
// A helper prints exactly one ready line (or an error line and exits 4
// before it), any number of observation lines, and ends with one result
// line, or an error line. A helper that connected to OVS also prints one
// cleanup line once it has deleted its flows, after the result line (and
// before an error line). Readers must ignore fields they do not know;
// a change that breaks readers increments SchemaVersion.
//
// `traceflow-helper serve` runs many traces in one process and writes all
// their lines to one stream: it prints one serving line first, and stamps
// every line of a trace with the trace's id ("trace"), so that each trace's
// lines read as one helper's lines would.

// SchemaVersion is the version of the line format this package writes.
const SchemaVersion = 1

// LineType names the kind of a line.
type LineType string

// Line types.
const (
	TypeReady       LineType = "ready"
	TypeObservation LineType = "observation"
	TypeResult      LineType = "result"
	TypeError       LineType = "error"
	TypeCleanup     LineType = "cleanup"
	// TypeServing is the first line of `traceflow-helper serve`: it reads
	// commands from now on.
	TypeServing LineType = "serving"
)

// Line is one JSON line of the helper's output.
type Line struct {
	Version int      `json:"v"`
	Type    LineType `json:"type"`
	// Trace is the id of the trace the line belongs to, set by serve only
	// (whose stream carries many traces); empty on a one-trace helper's
	// lines and on serve's own (serving, and errors about a command that
	// named no trace).
	Trace       string       `json:"trace,omitempty"`
	Time        time.Time    `json:"time"`
	Ready       *Ready       `json:"ready,omitempty"`
	Observation *Observation `json:"observation,omitempty"`
	// Hop explains an observation with OVS's own view: table and flow.
	Hop         *Hop         `json:"hop,omitempty"`
	Result      *NodeResult  `json:"result,omitempty"`
	Explanation *Explanation `json:"explanation,omitempty"`
	// ExitCode is the helper's exit code, on the result line.
	ExitCode *int     `json:"exitCode,omitempty"`
	Error    *Error   `json:"error,omitempty"`
	Cleanup  *Cleanup `json:"cleanup,omitempty"`
	Serving  *Serving `json:"serving,omitempty"`
	// Reply marks the lines of the answer's trace (--reply-tag): the
	// destination's answer to the probe, followed back on this node.
	Reply bool `json:"reply,omitempty"`
	// Answer says what the answer is, on the observation of the node
	// where the answer was caught.
	Answer *Answer `json:"answer,omitempty"`
	// Unfollowed, on the answer's result line, says why the helper did
	// not follow the answer (the probe's source was translated, so the
	// answer comes back to an address its catch does not know).
	Unfollowed string `json:"unfollowed,omitempty"`
	// Uncaught, on the answer's result line where it caught nothing,
	// names the kinds of answer (Answer.Class) the helper could not
	// catch on this node: another trace from the same source was
	// catching them at the same time.
	Uncaught []string `json:"uncaught,omitempty"`
}

// Answer is what came back to the probe's source.
type Answer struct {
	// Kind names the packet: "SYN-ACK", "RST", "echo reply", "UDP",
	// "ICMP DestinationUnreachable(Port)", ...
	Kind string `json:"kind"`
	// Refused is true for an answer that says no: a RST, an ICMP error.
	Refused bool `json:"refused,omitempty"`
	// From is the answer's source address where it was caught.
	From string `json:"from,omitempty"`
}

// Class is the kind of answer as a helper's Uncaught names it: "TCP",
// "UDP", "echo reply" or "ICMP error".
func (a Answer) Class() string {
	switch {
	case a.Kind == "echo reply":
		return "echo reply"
	case strings.HasPrefix(a.Kind, "ICMP"):
		return "ICMP error"
	case a.Kind == "UDP":
		return "UDP"
	}
	return "TCP"
}

// Command is one line of a serve helper's standard input: start the trace
// ID with Args (a trace or receive invocation, as on the command line:
// HelperArgs.Args), or stop it.
type Command struct {
	ID   string   `json:"id"`
	Args []string `json:"args,omitempty"`
	Stop bool     `json:"stop,omitempty"`
	// Hello asks for a serving line (without trace): a reader that
	// attached to serve's output after its first serving line learns from
	// the answer that its output reaches it.
	Hello bool `json:"hello,omitempty"`
}

// Serving says a serve helper has started and reads commands.
type Serving struct {
	Node string `json:"node,omitempty"`
	// HelperVersion is the helper binary's version.
	HelperVersion string `json:"helperVersion"`
}

// Cleanup says what the helper's deletion of its flows left: it is the
// last thing a helper does, so whoever stops a helper knows from this line
// that the bridge holds nothing of the trace any more (or what it holds).
type Cleanup struct {
	// Cookie is the trace's flow cookie ("0x...").
	Cookie string `json:"cookie"`
	// FlowsLeft counts the trace's flows still in the bridge after the
	// deletion; -1 when they could not be counted.
	FlowsLeft int `json:"flowsLeft"`
	// HardTimeout is the flows' hard_timeout in seconds: the latest they
	// expire by themselves, counted from when they were installed.
	HardTimeout int `json:"hardTimeout"`
	// FlowsInstalled counts every flow the trace added to the bridge:
	// those of the ready line and those added after it, where the trace
	// was continued past a recirculation (flows put back after another
	// client deleted them are not counted again).
	FlowsInstalled int `json:"flowsInstalled"`
	// Error says why the deletion or the count failed.
	Error string `json:"error,omitempty"`
}

// Ready says the helper has installed its flows.
type Ready struct {
	Node string `json:"node,omitempty"`
	// HelperVersion is the helper binary's version.
	HelperVersion string `json:"helperVersion"`
	Mode          Role   `json:"mode"`
	Bridge        string `json:"bridge"`
	Tag           uint8  `json:"tag"`
	// Cookie is the trace's flow cookie ("0x..."), for cleaning up by hand:
	// ovs-ofctl del-flows BRIDGE cookie=COOKIE/-1.
	Cookie       string `json:"cookie"`
	ControllerID uint16 `json:"controllerID"`
	Flows        int    `json:"flows"`
	// SourcePort and PortMatch say which port the probe enters and how the
	// helper found it (sender only).
	SourcePort string `json:"sourcePort,omitempty"`
	PortMatch  string `json:"portMatch,omitempty"`
	// Naming says why the hops carry table numbers only where the
	// pipeline has names of its own that the helper could not read (OVN's
	// southbound database out of reach).
	Naming string `json:"naming,omitempty"`
	// Setup is what the helper's setup spent, step by step, before this
	// line: where a trace's time goes before the probe is injected.
	Setup []Step `json:"setup,omitempty"`
}

// Step is one step of a helper's setup and the time it took.
type Step struct {
	Step   string `json:"step"`
	Micros int64  `json:"us"`
}

// Hop is OVS's account of one table visit.
type Hop struct {
	Index     int    `json:"index"`
	Table     uint8  `json:"table"`
	TableName string `json:"tableName,omitempty"`
	// Flow is the flow as OVS prints it: match and priority.
	Flow     string   `json:"flow,omitempty"`
	Priority uint16   `json:"priority"`
	Cookie   string   `json:"cookie,omitempty"`
	Actions  []string `json:"actions,omitempty"`
	NoMatch  bool     `json:"noMatch,omitempty"`
	// Observed is true when the real probe reported from this hop; false
	// where only OVS's trace accounts for it.
	Observed bool `json:"observed"`
	// OVN is OVN's account of the flow, on a bridge OVN programs.
	OVN *OVNHop `json:"ovn,omitempty"`
	// PipelineFlows, on a drop where no flow matched, counts the flows the
	// bridge held at that moment besides those of traces (kubectl-traceflow's
	// helpers'): 0 means the node's CNI had not programmed its pipeline (a
	// restarted ovs-vswitchd before its agent's first sync, say).
	PipelineFlows *int `json:"pipelineFlows,omitempty"`
	// PolicyUnknown, on a hop through a policy rule known by its
	// conjunction id only, says why the helper could not name the rule's
	// policy (Antrea's agent unreachable, say).
	PolicyUnknown string `json:"policyUnknown,omitempty"`
}

// OVNHop is the OVN row behind a hop's flow (its cookie is the first 32
// bits of the row's UUID).
type OVNHop struct {
	// Stage is the logical flow's stage (ls_in_acl, lr_in_ip_routing...).
	Stage string `json:"stage,omitempty"`
	// Datapath is the logical switch or router.
	Datapath string `json:"datapath,omitempty"`
	// LogicalFlow is the southbound logical flow (or port binding).
	LogicalFlow string `json:"logicalFlow,omitempty"`
	UUID        string `json:"uuid,omitempty"`
	// NBRow is the northbound ACL or load balancer behind the stage-hint.
	NBRow string `json:"nbRow,omitempty"`
	// Object is the Kubernetes object OVN-Kubernetes recorded on NBRow.
	Object string `json:"object,omitempty"`
}

// Explanation is the whole path on a node as OVS traced it.
type Explanation struct {
	Hops []Hop `json:"hops"`
	// DatapathActions is OVS's final verdict ("drop", "3", "tnl_push(...)").
	DatapathActions string `json:"datapathActions,omitempty"`
	// Summary is one sentence for humans.
	Summary string `json:"summary,omitempty"`
	// Trace is the text of ofproto/trace, for the curious.
	Trace string `json:"trace,omitempty"`
	// Naming says how the hops are named where that is not by the
	// pipeline's own words: why they carry table numbers only.
	Naming string `json:"naming,omitempty"`
}

// ErrorCode classifies an error line.
type ErrorCode string

// Error codes.
const (
	ErrorSetup   ErrorCode = "setup"
	ErrorTimeout ErrorCode = "timeout"
	ErrorUsage   ErrorCode = "usage"
)

// Error is a failure that ends the helper.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
}

// Writer writes lines. A writer and the writers ForTrace derives from it
// share one lock, so that they may write from many goroutines at once and
// each line still comes out whole.
type Writer struct {
	out   io.Writer
	enc   *json.Encoder
	now   func() time.Time
	mu    *sync.Mutex
	trace string
	reply bool
}

// NewWriter writes JSON lines to w with timestamps from now.
func NewWriter(w io.Writer, now func() time.Time) *Writer {
	if now == nil {
		now = time.Now
	}
	return &Writer{out: w, enc: json.NewEncoder(w), now: now, mu: new(sync.Mutex)}
}

// Text writes text as plain lines among the JSON lines, under the same
// lock as Write. Where one stream carries both, each JSON line stays whole:
// serve's log goes to standard output this way, because the plugin reads
// serve's output back as the container's log, in which the container
// runtime splits a long line (a result line of many hops is tens of KiB)
// into parts and may put a line of standard error between them.
func (w *Writer) Text(text string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := io.WriteString(w.out, strings.TrimRight(text, "\n")+"\n")
	return err
}

// ForTrace returns a writer to the same stream that stamps every line with
// the trace id (Line.Trace): serve hands one to each trace it runs.
func (w *Writer) ForTrace(id string) *Writer {
	c := *w
	c.trace = id
	return &c
}

// ForReply returns a writer to the same stream that marks every line as
// the answer's (Line.Reply).
func (w *Writer) ForReply() *Writer {
	c := *w
	c.reply = true
	return &c
}

// Write stamps l with the version, time and (from a ForTrace writer) trace
// id, and writes it.
func (w *Writer) Write(l Line) error {
	l.Version = SchemaVersion
	if l.Time.IsZero() {
		l.Time = w.now().UTC()
	}
	if w.trace != "" {
		l.Trace = w.trace
	}
	if w.reply {
		l.Reply = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enc.Encode(l)
}

// ParseLine decodes and checks one line.
func ParseLine(b []byte) (Line, error) {
	var l Line
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("helper report line is not JSON: %w", err)
	}
	if l.Version < 1 {
		return l, errors.New("helper report line has no schema version")
	}
	if l.Version > SchemaVersion {
		return l, fmt.Errorf("helper report schema v%d is newer than this reader (v%d): use a plugin as new as the helper image", l.Version, SchemaVersion)
	}
	var ok bool
	switch l.Type {
	case TypeReady:
		ok = l.Ready != nil
	case TypeObservation:
		ok = l.Observation != nil
	case TypeResult:
		ok = l.Result != nil
	case TypeError:
		ok = l.Error != nil
	case TypeCleanup:
		ok = l.Cleanup != nil
	case TypeServing:
		ok = l.Serving != nil
	default:
		return l, fmt.Errorf("helper report line has unknown type %q", l.Type)
	}
	if !ok {
		return l, fmt.Errorf("helper report %s line lacks its %s field", l.Type, l.Type)
	}
	return l, nil
}

// Reader reads lines from a helper's output.
type Reader struct {
	sc *bufio.Scanner
}

// NewReader reads JSON lines from r.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 8*1024*1024)
	return &Reader{sc: sc}
}

// Next returns the next line, skipping blank lines; io.EOF at the end.
func (r *Reader) Next() (Line, error) {
	for r.sc.Scan() {
		b := r.sc.Bytes()
		if len(b) == 0 {
			continue
		}
		return ParseLine(b)
	}
	if err := r.sc.Err(); err != nil {
		return Line{}, err
	}
	return Line{}, io.EOF
}
