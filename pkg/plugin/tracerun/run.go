package tracerun

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/engine"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/explain"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helpermode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Options are how a trace runs, as the trace command's flags (or a check
// run's) set them.
type Options struct {
	// Engine is auto, agent or helper.
	Engine string
	// Keep keeps the record after the trace.
	Keep bool
	// Timeout is the trace's: the record's (Record) and the helpers'.
	Timeout         time.Duration
	HelperImage     string
	HelperNamespace string
	OVSRunDir       string
	OVNRunDir       string
	Bridge          string
	// AntreaNames: helpers ask Antrea's agents to name policy rules.
	AntreaNames bool
	// Pool, when set, is a check run's shared helpers.
	Pool *helpermode.Pool
	// Abandon is told what runs, for the cleanup of a second Ctrl-C.
	Abandon Abandoner
	// RoundTrip follows the destination's answer back to the source
	// (helper engine only).
	RoundTrip bool
	// RecordInMemory keeps each trace's record in the plugin, never as a
	// Traceflow object, unless Keep asks for the object: a run whose
	// records nobody reads (a matrix) spares the API server a create, a
	// status write per hop and a delete per trace.
	RecordInMemory bool
	// Facts, when set, is the run's cache of the facts the engine choice
	// rests on (FactsCache).
	Facts *FactsCache
	// Tags, when set, are the tags the run's traces hold or are claiming
	// (tagalloc.Local), shared by all of them.
	Tags *tagalloc.Local
	// Reads, when set, are what the run's traces read to name the
	// policies behind their drops (explain.Reads), shared by all of them.
	Reads *explain.Reads
}

// ManyTraces readies o for a run of many traces (a check suite, a
// matrix). Nobody reads their records unless the run keeps them (Keep):
// they stay in the plugin. The engine choice rests on facts read once per
// set of nodes. A trace skips the tags the run's other traces hold
// without asking the API server, and the reads that name a drop's policy
// are shared for a moment (explain.ReadsMaxAge).
func (o *Options) ManyTraces() {
	o.RecordInMemory, o.Facts, o.Tags, o.Reads = true, NewFactsCache(), tagalloc.NewLocal(), explain.NewReads()
}

// Runner runs traces against one cluster.
type Runner struct {
	Clients *Clients
	Options Options
	// Emit receives the trace's updates for the view; it is called from
	// the engines' goroutines.
	Emit func(outcome.Update)
	// Notes receives what people are told beside the view: warnings about
	// what could not be known. Nil discards them.
	Notes io.Writer
	// Announce, when set, is told each engine decision as it is made, as
	// the line that says which engine traces and why (the structured
	// formats print it to stderr).
	Announce func(line string)
}

// Trace is one trace to run: the resolved endpoints and the record built
// from them.
type Trace struct {
	Resolved *resolve.Result
	Record   *traceflow.Traceflow
}

// tracer is what each engine offers the runner: run the job to its end.
type tracer interface {
	trace(ctx context.Context, j *job) (outcome.Ended, error)
}

// job is one trace as the engines see it: what the runner found out about
// it before choosing one.
type job struct {
	Trace
	started   outcome.TraceStarted
	receivers []string
	facts     engine.Facts
	decision  engine.Decision
	// empty names a destination Service without a ready endpoint
	// ("NAMESPACE/NAME"; "" otherwise); blind then says why Antrea's agents
	// cannot see this trace's end.
	empty, blind string
}

// Run runs t with the engine the options and the cluster choose, feeding
// updates to Emit, and returns how it ended. A zero Ended (no verdict)
// with an error is a trace that never started.
func (r *Runner) Run(ctx context.Context, t Trace) (outcome.Ended, error) {
	j, err := r.prepare(ctx, t)
	if err != nil {
		return outcome.Ended{}, err
	}
	end, err := r.runJob(ctx, j)
	if j.empty != "" && (end.Verdict == outcome.Dropped || end.Verdict == outcome.Rejected) {
		end.Reason += fmt.Sprintf(": Service %s has no ready endpoints", j.empty)
	}
	end.Destination = j.started.DestinationKind
	return end, err
}

// runJob runs j with the chosen engine, and again with helper pods where
// Antrea's agents ended it without saying where the packet ended.
func (r *Runner) runJob(ctx context.Context, j *job) (outcome.Ended, error) {
	if j.decision.Mode == engine.Agent {
		end, err := r.agent(j).trace(ctx, j)
		if !r.retryWithHelper(ctx, j, end, err) {
			return end, err
		}
		// Antrea's agents said nothing of where the packet ended (a result
		// lost, a packet they do not report): under auto the user gets an
		// answer, not a blind timeout, from the engine that sees the
		// packet wherever it goes. Helper mode records nothing where
		// Antrea's controller could act on it.
		r.Emit(outcome.Retried{At: outcome.At{Time: time.Now()}, Why: fmt.Sprintf("Antrea's agents did not say where the packet ended (%s): tracing again with helper pods", end.Reason)})
		j.decision = engine.Decision{Mode: engine.Helper, Reason: "Antrea's agents did not say where the packet ended: tracing again with helper pods"}
		j.started.Engine, j.started.EngineReason = string(j.decision.Mode), j.decision.Reason
		r.announce(j.decision)
	}
	if j.Record.Spec.LiveTraffic {
		return outcome.Ended{}, exitcode.UsageErrorf("--live traces real traffic, which only Antrea's agents can do (%s): drop --live to inject a probe with the helper engine", j.decision.Reason)
	}
	return r.helper(j).trace(ctx, j)
}

// retryWithHelper reports whether an agent-mode trace that ended with end
// and err is to be traced again with helper pods: under --engine auto (not
// agent, which asks for Antrea's own answer), for an injected probe
// (--live traces real traffic, which only Antrea can), when Antrea ended
// the trace without saying where the packet ended and the user did not
// interrupt it.
func (r *Runner) retryWithHelper(ctx context.Context, j *job, end outcome.Ended, err error) bool {
	return engine.Mode(r.Options.Engine) == engine.Auto && !j.Record.Spec.LiveTraffic && end.Verdict == outcome.Incomplete && err == nil && ctx.Err() == nil
}

// prepare finds the receivers and the facts the engine choice rests on,
// and makes the choice.
func (r *Runner) prepare(ctx context.Context, t Trace) (*job, error) {
	c := r.Clients
	res := t.Resolved
	rec, err := r.receiverNodes(ctx, res)
	if err != nil {
		return nil, err
	}
	nodes := append([]string{res.Source.Node}, rec.nodes...)
	facts, err := r.Options.Facts.gather(ctx, nodes, func(ctx context.Context, nodes []string) (engine.Facts, error) {
		return engine.Gather(ctx, engine.Sources{
			Discovery: c.Kube.Discovery(), Infos: c.Dynamic, Pods: c.Kube.CoreV1().Pods(""),
			ServerNow: c.ServerNow, LocalNow: time.Now,
		}, nodes)
	})
	if err != nil {
		return nil, err
	}
	j := &job{Trace: t, receivers: rec.nodes, empty: rec.empty}
	if rec.empty != "" {
		// Antrea's proxy answers a packet to a Service without endpoints
		// itself (a TCP RST or an ICMP unreachable, from its agent's
		// packet-in handler) before the packet reaches a table whose
		// packet-in the Traceflow handler reports: its trace only times
		// out. Helper pods see the reject.
		j.blind = fmt.Sprintf("Service %s has no ready endpoints, and Antrea's proxy rejects a packet to it before any of Antrea's agents reports the packet (its Traceflow only times out)", rec.empty)
	}
	asNode := res.Source.AsNode() && !t.Record.Spec.LiveTraffic
	if asNode {
		// Antrea's Traceflow injects only at a pod's own port; a helper
		// injects where the node's own traffic enters the bridge.
		j.blind = fmt.Sprintf("the source is %s, whose traffic is its node's, and Antrea's Traceflow starts only at a pod's own port", EndpointName(res.Source))
	}
	outside := res.Source.Kind == resolve.KindIP
	if outside {
		j.blind = fmt.Sprintf("the source %s is outside the cluster, and Antrea's Traceflow starts only at a pod's own port", res.Source.IP)
	}
	if r.Options.RoundTrip && j.blind == "" {
		j.blind = "a round trip follows the destination's answer back, which Antrea's Traceflow does not"
	}
	facts.AgentBlind = j.blind
	j.facts = facts
	d, err := engine.Decide(engine.Mode(r.Options.Engine), facts, nodes)
	if err != nil {
		return nil, err
	}
	if d.Mode == engine.Agent && r.Options.RoundTrip {
		return nil, exitcode.UsageErrorf("--engine agent: Antrea's Traceflow follows the probe one way only: use --engine helper (or auto) for --round-trip, or drop --round-trip")
	}
	if d.Mode == engine.Agent && outside {
		return nil, exitcode.UsageErrorf("--engine agent: Antrea's Traceflow starts only at a pod's own port, and SRC %s is outside the cluster: use --engine helper (or auto), which injects where node %s's uplink receives it", res.Source.IP, res.Source.Node)
	}
	if d.Mode == engine.Agent && asNode {
		return nil, exitcode.UsageErrorf("--engine agent: Antrea's Traceflow starts only at a pod's own port, and SRC %s sends as node %s: use --engine helper (or auto), which injects as the node", EndpointName(res.Source), res.Source.Node)
	}
	d = recordWhere(d, r.Options)
	if c.Dynamic != nil {
		d = engine.CheckRecordHome(ctx, c.Dynamic.Resource(traceflow.CRDsResource), d)
	} else if d.RecordAsCR {
		d.RecordAsCR, d.Reason = false, d.Reason+"; the record stays in the plugin (see -o yaml): no client to read the Traceflow CRD with"
	}
	j.decision = d
	r.announce(d)
	j.started = outcome.TraceStarted{
		Name: t.Record.Name, Engine: string(d.Mode), EngineReason: d.Reason,
		Source: EndpointName(res.Source), Destination: destinationName(res), DestinationKind: rec.kind,
		Packet: traceflow.DescribePacket(t.Record.Spec),
	}
	return j, nil
}

// recordWhere keeps the record of a run that asks for none (RecordInMemory,
// without Keep) in the plugin, and says so in the decision's reason.
func recordWhere(d engine.Decision, o Options) engine.Decision {
	if d.RecordAsCR && o.RecordInMemory && !o.Keep {
		d.RecordAsCR, d.Reason = false, d.Reason+"; the record stays in the plugin: this run keeps no record"
	}
	return d
}

// destinationName is how the view names the destination: from outside,
// the address and port the packet goes to, and the Service behind them.
func destinationName(res *resolve.Result) string {
	if e := res.Entry; e != nil {
		return fmt.Sprintf("%s (%s of %s)", res.Destination.IP, e.How, EndpointName(res.Destination))
	}
	return EndpointName(res.Destination)
}

func (r *Runner) announce(d engine.Decision) {
	if r.Announce != nil {
		r.Announce(d.String())
	}
}

// explainer names the policy behind a drop, for either engine: from the
// agents where the helper can ask them; a default deny, which no agent
// names, from the API.
func (r *Runner) explainer(j *job) *explain.Explainer {
	return explain.New(r.Clients.Kube, j.Resolved).Sharing(r.Options.Reads)
}
