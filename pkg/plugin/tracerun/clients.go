package tracerun

import (
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/engine"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Clients is everything a trace needs from the cluster, each behind a
// small interface so tests can hand in fakes.
type Clients struct {
	// Namespace is the default namespace: -n, or the kubeconfig context's.
	Namespace  string
	Lookup     resolve.Lookup
	Traceflows traceflow.Client
	// Dynamic serves install-crd, which writes a CustomResourceDefinition,
	// and the check of where a record may live.
	Dynamic dynamic.Interface
	// Kube runs traces: helper pods, tag claims, engine detection.
	Kube kubernetes.Interface
	// Streams serves the calls that last as long as a trace (watches,
	// helper logs): Kube without --request-timeout, which bounds every
	// other call. Nil means Kube.
	Streams kubernetes.Interface
	// RESTConfig serves attach to a helper's stdin, without
	// --request-timeout either; may be nil.
	RESTConfig *rest.Config
	// ServerNow is the API server's clock as of its latest response (the
	// Date header), so that the age of Antrea's heartbeats is judged with
	// server time only; nil where unknown.
	ServerNow func() (time.Time, bool)
	// Requests counts the API requests made through Kube, Streams,
	// Dynamic and Lookup (attach streams aside); nil where unknown.
	Requests func() int64
}

// Abandoner keeps the cleanup that a second Ctrl-C starts up to date: Add
// counts a trace (or a pool of shared helpers) as running until the
// returned func is called.
type Abandoner interface {
	Add(name string) (done func())
}

// The client-side rate limit of the plugin's API clients.
const (
	clientQPS   = 100
	clientBurst = 200
)

// Connect loads the kubeconfig (honouring
// --kubeconfig, --context, -n and the rest) and builds the clients. It
// makes no API call.
func Connect(cf *genericclioptions.ConfigFlags) (*Clients, error) {
	ns, _, err := cf.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, exitcode.Errorf(exitcode.Setup, "reading the kubeconfig: %w; check --kubeconfig, KUBECONFIG and --context", err)
	}
	cfg, err := cf.ToRESTConfig()
	if err != nil {
		return nil, exitcode.Errorf(exitcode.Setup, "reading the kubeconfig: %w; check --kubeconfig, KUBECONFIG and --context", err)
	}
	// client-go's default of 5 requests a second (burst 10) is for
	// controllers that run forever; `check` runs up to 14 traces at once,
	// each a few dozen calls, and its cleanup on Ctrl-C must not queue
	// behind the limiter past its budget. The API server's priority and
	// fairness still protects it.
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	// The API clients note the server's Date on every response; attach
	// keeps the plain config (an upgrade needs its own transport).
	clock := &engine.ServerClock{}
	api := rest.CopyConfig(cfg)
	api.Wrap(clock.Wrap)
	cs, dyn, err := clientsFor(api)
	if err != nil {
		return nil, err
	}
	// --request-timeout is the http.Client's Timeout, which also ends a
	// response body being read: a watch or a log stream would end after
	// it. Those take the trace's context instead (its --timeout, Ctrl-C).
	long := rest.CopyConfig(api)
	long.Timeout = 0
	streams, dynStreams, err := clientsFor(long)
	if err != nil {
		return nil, err
	}
	attach := rest.CopyConfig(cfg)
	attach.Timeout = 0
	return &Clients{Namespace: ns, Lookup: resolve.FromClientset(cs), Traceflows: traceflow.NewClient(dyn, dynStreams), Dynamic: dyn,
		Kube: cs, Streams: streams, RESTConfig: attach, ServerNow: clock.Now, Requests: clock.Requests}, nil
}

// clientsFor makes the typed and the dynamic client over cfg.
func clientsFor(cfg *rest.Config) (kubernetes.Interface, dynamic.Interface, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err == nil {
		var dyn dynamic.Interface
		if dyn, err = dynamic.NewForConfig(cfg); err == nil {
			return cs, dyn, nil
		}
	}
	return nil, nil, exitcode.Errorf(exitcode.Setup, "making a Kubernetes client: %w; check the cluster entry of the kubeconfig", err)
}
