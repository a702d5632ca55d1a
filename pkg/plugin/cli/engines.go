package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strconv"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/version"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/agentmode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/engine"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/explain"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helpermode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// traceResult is how a trace ended, whichever engine ran it.
type traceResult struct {
	verdict outcome.Verdict
	reason  string
	// dst is what the destination is, which the exit code depends on.
	dst outcome.DestinationKind
	// decided is the hop that decided the verdict, if one did.
	decided *outcome.Hop
}

// trace chooses the engine and runs the trace, feeding updates to emit.
func (o *TraceOptions) trace(ctx context.Context, c *Clients, res *resolve.Result, tf *traceflow.Traceflow, emit func(outcome.Update)) (out traceResult, err error) {
	receivers, dstKind, empty, err := o.receiverNodes(ctx, c, res)
	if err != nil {
		return traceResult{}, err
	}
	facts, err := engine.Gather(ctx, engine.Sources{
		Discovery: c.Kube.Discovery(), Infos: c.Dynamic, Pods: c.Kube.CoreV1().Pods(""),
		ServerNow: c.ServerNow, LocalNow: time.Now,
	}, append([]string{res.Source.Node}, receivers...))
	if err != nil {
		return traceResult{}, err
	}
	blind := ""
	if empty != "" {
		// Antrea's proxy answers a packet to a Service without endpoints
		// itself (a TCP RST or an ICMP unreachable, from its agent's
		// packet-in handler) before the packet reaches a table whose
		// packet-in the Traceflow handler reports: its trace only times
		// out. Helper pods see the reject.
		blind = fmt.Sprintf("Service %s has no ready endpoints, and Antrea's proxy rejects a packet to it before any of Antrea's agents reports the packet (its Traceflow only times out)", empty)
		defer func() {
			if out.verdict == outcome.Dropped || out.verdict == outcome.Rejected {
				out.reason += fmt.Sprintf(": Service %s has no ready endpoints", empty)
			}
		}()
	}
	facts.AgentBlind = blind
	d, err := engine.Decide(engine.Mode(o.engine), facts, append([]string{res.Source.Node}, receivers...))
	if err != nil {
		return traceResult{}, err
	}
	if c.Dynamic != nil {
		d = engine.CheckRecordHome(ctx, c.Dynamic.Resource(crdResource()), d)
	} else if d.RecordAsCR {
		d.RecordAsCR, d.Reason = false, d.Reason+"; the record stays in the plugin (see -o yaml): no client to read the Traceflow CRD with"
	}
	if o.format == outputJSON || o.format == outputYAML {
		// Structured output goes to stdout; the engine line, for people, to stderr.
		_, _ = fmt.Fprintln(o.ErrOut, d.String())
	}
	started := outcome.TraceStarted{
		Name: tf.Name, Engine: string(d.Mode), EngineReason: d.Reason,
		Source: endpointName(res.Source), Destination: endpointName(res.Destination), DestinationKind: dstKind,
		Packet: describePacket(tf.Spec),
	}
	if d.Mode == engine.Agent {
		r := &agentmode.Runner{Records: c.Traceflows, Now: time.Now, Emit: emit, SourceNode: res.Source.Node,
			// Antrea names no policy at a Kubernetes NetworkPolicy's
			// default deny; the plugin does, as in helper mode.
			Explainer: explain.New(c.Kube, res), Blind: blind}
		ao, err := r.Run(ctx, tf, started, o.keep)
		out.verdict, out.reason, out.dst, out.decided = ao.Verdict, ao.Reason, dstKind, ao.Decided
		if !o.retryWithHelper(ctx, ao, err) {
			return out, err
		}
		// Antrea's agents said nothing of where the packet ended (a result
		// lost, a packet they do not report): under auto the user gets an
		// answer, not a blind timeout, from the engine that sees the
		// packet wherever it goes. Helper mode records nothing where
		// Antrea's controller could act on it.
		emit(outcome.Retried{At: outcome.At{Time: time.Now()}, Why: fmt.Sprintf("Antrea's agents did not say where the packet ended (%s): tracing again with helper pods", ao.Reason)})
		d = engine.Decision{Mode: engine.Helper, Reason: "Antrea's agents did not say where the packet ended: tracing again with helper pods"}
		started.Engine, started.EngineReason = string(d.Mode), d.Reason
		if o.format == outputJSON || o.format == outputYAML {
			_, _ = fmt.Fprintln(o.ErrOut, d.String())
		}
		out = traceResult{}
	}
	if o.live {
		return out, exitcode.UsageErrorf("--live traces real traffic, which only Antrea's agents can do (%s): drop --live to inject a probe with the helper engine", d.Reason)
	}
	if err := checkHelperNamespace(ctx, c.Kube.CoreV1().Namespaces().Get, o.helperNamespace); err != nil {
		return out, err
	}
	leases := c.Kube.CoordinationV1().Leases(o.helperNamespace)
	r := &helpermode.Runner{
		Cluster: helpermode.NewCluster(c.Kube, c.Streams, c.RESTConfig),
		Tags: &tagalloc.Allocator{
			Leases:    leases,
			ServerNow: tagalloc.ServerClock(leases, time.Now),
			Start:     rand.IntN, // plugins started together try different tags first
			// Unique, not secret: it tells two claims of one trace name apart.
			Nonce: func() string { return strconv.FormatUint(rand.Uint64(), 36) }, //nolint:gosec // see above
		},
		Records: c.Traceflows,
		Now:     time.Now,
		Emit:    emit,
		Version: version.Version,
		// Policy names: from the agents where the helper can ask them;
		// a default deny, which no agent names, from the API.
		Explainer: explain.New(c.Kube, res),
		NodeLease: func(ctx context.Context, node string) (*coordinationv1.Lease, error) {
			return c.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		},
		ServerNow: c.ServerNow,
	}
	if facts.CRDServed {
		r.InUse = antreaTags(c.Traceflows)
	}
	ab := o.abandon
	if ab == nil {
		ab = newAbandoner(o.deps.Abandon, o.cleanupTail())
	}
	defer ab.add(tf.Name)()
	ho, err := r.Run(ctx, helpermode.Config{
		Namespace: o.helperNamespace, Image: o.helperImage, OVSRunDir: o.ovsRunDir, OVNRunDir: o.ovnRunDir, Bridge: o.bridge,
		Timeout: o.timeout, Keep: o.keep,
		ParallelStart: o.pool == nil && c.RESTConfig != nil && canAttach(ctx, c.Kube, o.helperNamespace),
		Pool:          o.pool,
		// Where Antrea's agents run, each node's helper asks its agent
		// to name the policy rules the probe meets.
		AntreaAgentPorts: o.agentPorts(facts),
	}, helpermode.Plan{
		Trace: tf.Name, View: started, Sender: res.Source.Node, Receivers: receivers,
		SenderArgs: senderArgs(res, tf), Record: tf, RecordAsCR: d.RecordAsCR,
	})
	out.verdict, out.reason, out.dst, out.decided = ho.Verdict, ho.Reason, dstKind, ho.Decided
	return out, err
}

// retryWithHelper reports whether an agent-mode trace that ended with ao
// and err is to be traced again with helper pods: under --engine auto (not
// agent, which asks for Antrea's own answer), for an injected probe
// (--live traces real traffic, which only Antrea can), when Antrea ended
// the trace without saying where the packet ended and the user did not
// interrupt it.
func (o *TraceOptions) retryWithHelper(ctx context.Context, ao agentmode.Outcome, err error) bool {
	return engine.Mode(o.engine) == engine.Auto && !o.live && ao.Verdict == outcome.Incomplete && err == nil && ctx.Err() == nil
}

// cleanupTail are the arguments of the cleanup a second Ctrl-C starts that
// follow its --trace flags. Unless --keep, a record is removed even when
// finished: the trace may have written its verdict into it and been
// stopped before it deleted it. A second sweep 2 s later removes what the
// plugin's last requests created after the first sweep had listed.
func (o *TraceOptions) cleanupTail() []string {
	tail := []string{"--helper-namespace", o.helperNamespace, "--request-timeout=5s", "--again-after=2s"}
	if !o.keep {
		tail = append(tail, "--all-records")
	}
	return append(tail, kubeconfigArgs(o.configFlags)...)
}

// antreaTags returns the dataplane tags of running traces that are not
// ours (ours hold a Lease): Antrea's, where Antrea also runs. Our pool is
// disjoint from the range Antrea v2 allocates from (tagalloc.Pool), so this
// only matters to an Antrea that allocates elsewhere.
func antreaTags(records traceflow.Client) func(context.Context) (map[uint8]bool, error) {
	return func(ctx context.Context) (map[uint8]bool, error) {
		list, err := records.List(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("list Traceflows: %w", err)
		}
		used := map[uint8]bool{}
		for _, tf := range list {
			if tf.Labels[traceflow.LabelManagedBy] != traceflow.ManagedBy && tf.Status.Phase == traceflow.PhaseRunning && tf.Status.DataplaneTag > 0 {
				used[uint8(tf.Status.DataplaneTag)] = true
			}
		}
		return used, nil
	}
}

// receiverNodes are the nodes other than the sender's where the probe may
// arrive through a tunnel: the destination pod's node, a Service's
// endpoints' nodes, or the node of the pod that owns a destination IP. It
// also says what the destination is: a pod on the pod network, a Service,
// an IP a pod holds, or outside the cluster's pods (a node's IP, a
// host-network pod, an external address), which decides whether leaving
// the pod network is the end the user wanted; and names a Service that has
// no ready endpoint (empty, "NAMESPACE/NAME"; "" otherwise).
func (o *TraceOptions) receiverNodes(ctx context.Context, c *Clients, res *resolve.Result) (nodes []string, kind outcome.DestinationKind, empty string, err error) {
	set := map[string]bool{}
	dst := res.Destination
	kind = outcome.DestinationOutside
	switch dst.Kind {
	case resolve.KindPod:
		set[dst.Node] = true
		if !dst.HostNetwork {
			kind = outcome.DestinationPod
		}
	case resolve.KindService:
		kind = outcome.DestinationService
		if empty, err = endpointNodes(ctx, c, dst.Namespace, dst.Name, set); err != nil {
			return nil, "", "", err
		}
	case resolve.KindIP:
		pods, err := c.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("status.podIP", dst.IP.String()).String(),
		})
		if err == nil {
			for _, p := range pods.Items {
				if !p.Spec.HostNetwork && p.Status.Phase == corev1.PodRunning {
					set[p.Spec.NodeName] = true
					kind = outcome.DestinationPodIP
				}
			}
		} else {
			// Without permission to list pods cluster-wide the trace still
			// runs: the sender's observations alone say where the packet
			// went. Whether the IP is a pod's is unknown: say how the
			// verdict will be read.
			_, _ = fmt.Fprintf(o.ErrOut, "Warning: cannot tell whether %s is a pod's IP (list pods cluster-wide: %v); a packet that leaves the pod network will count as delivered\n", dst.IP, err)
		}
		if kind == outcome.DestinationOutside {
			// A Service's cluster IP given bare: the probe goes to one of its
			// endpoints, whose nodes must be watching for it as they are for
			// svc/NAME, or a probe tunnelled to one is never seen arriving.
			svc, err := serviceWithClusterIP(ctx, c, dst.IP)
			switch {
			case err != nil:
				_, _ = fmt.Fprintf(o.ErrOut, "Warning: cannot tell whether %s is a Service's cluster IP (list Services cluster-wide: %v); a probe sent to another node's endpoint will not be seen arriving\n", dst.IP, err)
			case svc != nil:
				kind = outcome.DestinationService
				if empty, err = endpointNodes(ctx, c, svc.Namespace, svc.Name, set); err != nil {
					return nil, "", "", err
				}
			}
		}
	}
	delete(set, res.Source.Node)
	delete(set, "")
	nodes = make([]string, 0, len(set))
	for n := range set {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	return nodes, kind, empty, nil
}

// endpointNodes adds to set the nodes of the ready endpoints of Service
// ns/name; where it has none, empty is "ns/name".
func endpointNodes(ctx context.Context, c *Clients, ns, name string, set map[string]bool) (empty string, err error) {
	slices, err := c.Lookup.EndpointSlices(ctx, ns, name)
	if err != nil {
		return "", exitcode.Errorf(exitcode.Setup, "list the endpoints of Service %s/%s: %w", ns, name, err)
	}
	ready := 0
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready++
				if e.NodeName != nil {
					set[*e.NodeName] = true
				}
			}
		}
	}
	if ready == 0 {
		empty = ns + "/" + name
	}
	return empty, nil
}

// serviceWithClusterIP is the Service that holds ip as one of its cluster
// IPs, or nil. All Services are listed and matched here: the field
// selector spec.clusterIP is not served by every API server this plugin
// supports.
func serviceWithClusterIP(ctx context.Context, c *Clients, ip netip.Addr) (*corev1.Service, error) {
	list, err := c.Kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		svc := &list.Items[i]
		for _, s := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
			if a, err := netip.ParseAddr(s); err == nil && a == ip {
				return svc, nil
			}
		}
	}
	return nil, nil
}

// senderArgs are the sender helper's flags: where to inject, and the packet.
func senderArgs(res *resolve.Result, tf *traceflow.Traceflow) []string {
	args := []string{
		"--source-pod", res.Source.Namespace + "/" + res.Source.Name,
		"--source-ip", res.Source.IP.String(),
		"--destination", res.Destination.IP.String(),
	}
	th := tf.Spec.Packet.TransportHeader
	switch {
	case th.TCP != nil:
		args = append(args, "--tcp", strconv.Itoa(int(th.TCP.DstPort)))
		if th.TCP.SrcPort != 0 {
			args = append(args, "--source-port", strconv.Itoa(int(th.TCP.SrcPort)))
		}
		if th.TCP.Flags != nil {
			args = append(args, "--tcp-flags", strconv.Itoa(int(*th.TCP.Flags)))
		}
	case th.UDP != nil:
		args = append(args, "--udp", strconv.Itoa(int(th.UDP.DstPort)))
		if th.UDP.SrcPort != 0 {
			args = append(args, "--source-port", strconv.Itoa(int(th.UDP.SrcPort)))
		}
	default:
		args = append(args, "--icmp")
	}
	if h := tf.Spec.Packet.IPHeader; h != nil && h.TTL != 0 {
		args = append(args, "--ttl", strconv.Itoa(int(h.TTL)))
	}
	if h := tf.Spec.Packet.IPv6Header; h != nil && h.HopLimit != 0 {
		args = append(args, "--ttl", strconv.Itoa(int(h.HopLimit)))
	}
	return args
}

// endpointName is how the view names an endpoint: NS/NAME, NS/svc/NAME or the IP.
func endpointName(e resolve.Endpoint) string {
	switch e.Kind {
	case resolve.KindPod:
		return e.Namespace + "/" + e.Name
	case resolve.KindService:
		return e.Namespace + "/svc/" + e.Name
	}
	return e.IP.String()
}

// canAttach asks the API server whether we may attach to pods in ns, which
// starting the sender together with the receivers needs. Where we may not,
// the sender starts after the receivers: slower, and it needs no more rights.
func canAttach(ctx context.Context, cs kubernetes.Interface, ns string) bool {
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Resource: "pods", Subresource: "attach",
		}},
	}, metav1.CreateOptions{})
	return err == nil && r.Status.Allowed
}

// agentPorts maps each node with an Antrea agent to its API's port, as the
// agent's record gives it; none with --antrea-names=false.
func (o *TraceOptions) agentPorts(f engine.Facts) map[string]int {
	m := map[string]int{}
	if !o.antreaNames {
		return m
	}
	for node, h := range f.Agents {
		if h.APIPort > 0 {
			m[node] = h.APIPort
		}
	}
	return m
}
