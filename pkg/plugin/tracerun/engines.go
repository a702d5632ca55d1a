package tracerun

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/version"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/agentmode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helpermode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// agentEngine traces through Antrea's own Traceflow.
type agentEngine struct {
	r    *agentmode.Runner
	keep bool
}

func (r *Runner) agent(j *job) tracer {
	return agentEngine{keep: r.Options.Keep, r: &agentmode.Runner{
		Records: r.Clients.Traceflows, Now: time.Now, Emit: r.Emit, SourceNode: j.Resolved.Source.Node,
		// Antrea names no policy at a Kubernetes NetworkPolicy's default
		// deny; the plugin does, as in helper mode.
		Explainer: r.explainer(j), Blind: j.blind,
	}}
}

func (a agentEngine) trace(ctx context.Context, j *job) (outcome.Ended, error) {
	o, err := a.r.Run(ctx, j.Record, j.started, a.keep)
	return o.Ended, err
}

// helperEngine traces with helper pods on the nodes: per trace, or on a
// check run's shared helpers.
type helperEngine struct {
	run     *Runner
	r       *helpermode.Runner
	options Options
}

func (r *Runner) helper(j *job) tracer {
	c := r.Clients
	leases := c.Kube.CoordinationV1().Leases(r.Options.HelperNamespace)
	h := &helpermode.Runner{
		Cluster: helpermode.NewCluster(c.Kube, c.Streams, c.RESTConfig),
		Tags: &tagalloc.Allocator{
			Leases:    leases,
			ServerNow: tagalloc.ServerClock(leases, time.Now),
			Start:     rand.IntN, // plugins started together try different tags first
			// Unique, not secret: it tells two claims of one trace name apart.
			Nonce: func() string { return strconv.FormatUint(rand.Uint64(), 36) }, //nolint:gosec // see above
			Local: r.Options.Tags,
		},
		Records:   c.Traceflows,
		Now:       time.Now,
		Emit:      r.Emit,
		Version:   version.Version,
		Explainer: r.explainer(j),
		NodeLease: func(ctx context.Context, node string) (*coordinationv1.Lease, error) {
			return c.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
		},
		ServerNow: c.ServerNow,
	}
	if j.facts.CRDServed {
		h.InUse = r.Options.Facts.inUse(antreaTags(c.Traceflows), time.Now)
	}
	return helperEngine{run: r, r: h, options: r.Options}
}

func (h helperEngine) trace(ctx context.Context, j *job) (outcome.Ended, error) {
	o, c := h.options, h.run.Clients
	if err := checkHelperNamespace(ctx, o.Facts.namespaceGetter(c.Kube.CoreV1().Namespaces().Get), o.HelperNamespace); err != nil {
		return outcome.Ended{}, err
	}
	if o.Abandon != nil {
		defer o.Abandon.Add(j.Record.Name)()
	}
	ho, err := h.r.Run(ctx, helpermode.Config{
		Namespace: o.HelperNamespace, Image: o.HelperImage, OVSRunDir: o.OVSRunDir, OVNRunDir: o.OVNRunDir, Bridge: o.Bridge,
		Timeout: o.Timeout, Keep: o.Keep,
		ParallelStart: o.Pool == nil && c.RESTConfig != nil && CanAttach(ctx, c.Kube, o.HelperNamespace),
		Pool:          o.Pool,
		// Where Antrea's agents run, each node's helper asks its agent
		// to name the policy rules the probe meets.
		AntreaAgentPorts: h.agentPorts(j),
	}, helpermode.Plan{
		Trace: j.Record.Name, View: j.started, Sender: j.Resolved.Source.Node, Receivers: j.receivers,
		SenderArgs: h.senderArgs(j), Record: j.Record, RecordAsCR: j.decision.RecordAsCR,
		RoundTrip: h.options.RoundTrip,
	})
	return ho.Ended, err
}

// senderArgs are the sender helper's flags. A round trip to a destination
// outside the pod network catches the answer wherever the pipeline
// translated the probe's source to on its way out (a gateway router's
// SNAT), by its ports and the destination's address.
func (h helperEngine) senderArgs(j *job) report.ProbeArgs {
	p := senderArgs(j.Resolved, j.Record)
	p.ReplyTranslated = h.options.RoundTrip && j.started.DestinationKind == outcome.DestinationOutside && j.Resolved.Entry == nil
	return p
}

// agentPorts maps each node with an Antrea agent to its API's port, as the
// agent's record gives it; none with --antrea-names=false.
func (h helperEngine) agentPorts(j *job) map[string]int {
	m := map[string]int{}
	if !h.options.AntreaNames {
		return m
	}
	for node, a := range j.facts.Agents {
		if a.APIPort > 0 {
			m[node] = a.APIPort
		}
	}
	return m
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
			if tf.Labels[labels.ManagedBy] != labels.Manager && tf.Status.Phase == traceflow.PhaseRunning && tf.Status.DataplaneTag > 0 {
				used[uint8(tf.Status.DataplaneTag)] = true
			}
		}
		return used, nil
	}
}

// CanAttach asks the API server whether we may attach to pods in ns, which
// starting the sender together with the receivers, and shared helpers,
// need. Where we may not, the sender starts after the receivers: slower,
// and it needs no more rights.
func CanAttach(ctx context.Context, cs kubernetes.Interface, ns string) bool {
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Resource: "pods", Subresource: "attach",
		}},
	}, metav1.CreateOptions{})
	return err == nil && r.Status.Allowed
}
