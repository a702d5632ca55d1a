// Package check is `kubectl traceflow check` below its flags: it reads
// suite files (Parse), and runs their cases: it expands
// each case into traces against the cluster (selectors to pods, a
// Service's endpoints), resolves every one of them before anything is
// created, runs them concurrently within the tag pool, and folds their
// verdicts into one exit code.
package check

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Trace is one trace of a case: a case stands for several when its source
// is `pods: all` of a selector, or its destination a Service with
// allEndpoints.
type Trace struct {
	// Case is the case, File its suite file.
	Case Case
	File string
	// Name is the case's name, with the source pod or the endpoint when the
	// case stands for several traces.
	Name    string
	Result  *resolve.Result
	Expect  outcome.Expect
	Timeout time.Duration
	// IPv6 is the trace's family where an address of the case says it
	// (from.ip, to.ip), as an IPv6 SRC or DST implies --ipv6.
	IPv6 bool
}

// Pods lists pods by label selector, for the cases that name their pods
// by labels.
type Pods interface {
	List(ctx context.Context, namespace, selector string) ([]corev1.Pod, error)
}

// PodsFromClientset returns Pods over a clientset.
func PodsFromClientset(cs kubernetes.Interface) Pods { return clientsetPods{cs} }

type clientsetPods struct{ cs kubernetes.Interface }

func (c clientsetPods) List(ctx context.Context, ns, sel string) ([]corev1.Pod, error) {
	l, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Planner expands and resolves cases. It only reads the cluster.
type Planner struct {
	Lookup resolve.Lookup
	Pods   Pods
	// Namespace applies to cases that name none (-n, or the context's).
	Namespace string
	// DefaultTimeout applies to cases that set none.
	DefaultTimeout time.Duration
}

// Plan expands every case of suites into traces and resolves each. The
// first problem is returned as a *Error naming the file, line and
// field, so that a bad suite creates nothing.
func (p *Planner) Plan(ctx context.Context, suites []*Suite) ([]Trace, error) {
	var out []Trace
	for _, s := range suites {
		for _, c := range s.Cases {
			ts, err := p.planCase(ctx, s.File, c)
			if err != nil {
				return nil, err
			}
			out = append(out, ts...)
		}
	}
	return out, nil
}

func (p *Planner) ns(n string) string {
	if n != "" {
		return n
	}
	return p.Namespace
}

// wrap gives an error of resolution the case's place; a cluster that
// cannot be asked keeps its exit code (4).
func wrap(at Pos, c Case, field string, err error) error {
	name := c.Name
	if c.Path != "" {
		field = strings.TrimSuffix(c.Path+"."+field, ".")
	}
	if exitcode.Of(err) == exitcode.Usage {
		e := Errorf(at, field, "%s", err.Error())
		e.Case = name
		return exitcode.Wrap(exitcode.Usage, e)
	}
	return fmt.Errorf("%s: case %q: %w", at, name, err)
}

func (p *Planner) planCase(ctx context.Context, file string, c Case) ([]Trace, error) {
	sources, err := p.sources(ctx, c)
	if err != nil {
		return nil, err
	}
	dst, err := p.destination(ctx, c)
	if err != nil {
		return nil, err
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = p.DefaultTimeout
	}
	var out []Trace
	for _, src := range sources {
		name := c.Name
		if c.From.Pick == PickAll {
			name += " [from " + src.Namespace + "/" + src.Name + "]"
		}
		q := p.query(c, src, dst)
		res, err := resolve.Resolve(ctx, p.Lookup, q)
		if err != nil {
			return nil, wrap(c.At, c, "", err)
		}
		if resolve.SameObject(src, dst) {
			return nil, wrap(c.To.At, c, "to", exitcode.UsageErrorf("the source and the destination are the same %s", src.Describe(p.Namespace)))
		}
		out = append(out, Trace{Case: c, File: file, Name: name, Result: res, Expect: c.Expect, Timeout: timeout, IPv6: q.IPv6})
		if !c.To.AllEndpoints {
			continue
		}
		eps, err := p.endpoints(ctx, c, res)
		if err != nil {
			return nil, err
		}
		for _, ep := range eps {
			q := q
			q.Destination = resolve.Ref{Kind: resolve.KindIP, IP: ep.ip}
			q.Protocol, q.DstPort = res.Protocol, ep.port
			eres, err := resolve.Resolve(ctx, p.Lookup, q)
			if err != nil {
				return nil, wrap(c.To.ServiceAt, c, "to.allEndpoints", err)
			}
			out = append(out, Trace{Case: c, File: file, Result: eres, Expect: c.Expect, Timeout: timeout, IPv6: q.IPv6,
				Name: fmt.Sprintf("%s [endpoint %s]", name, netip.AddrPortFrom(ep.ip, uint16(ep.port)))}) //nolint:gosec // a port is 1-65535
		}
	}
	return out, nil
}

// query is what resolution is asked for a trace of c from src to dst, as
// a single trace asks it for SRC, DST and --via: an IPv6 address in the
// case makes the trace IPv6, as it implies --ipv6.
func (p *Planner) query(c Case, src, dst resolve.Ref) resolve.Query {
	return resolve.Query{Source: src, Destination: dst, Namespace: p.Namespace, Protocol: c.Protocol, DstPort: c.Port,
		Via: c.From.Via, IPv6: src.IP.Is6() || dst.IP.Is6()}
}

// sources are where the traces of c start: the node, the address outside
// the cluster, the pod, or the first (or all) Ready pods of the selector,
// by name.
func (p *Planner) sources(ctx context.Context, c Case) ([]resolve.Ref, error) {
	switch {
	case c.From.Node != "":
		return []resolve.Ref{{Kind: resolve.KindNode, Name: c.From.Node}}, nil
	case c.From.IP != "":
		ip, err := netip.ParseAddr(c.From.IP)
		if err != nil { // Parse checked it; a Case built by hand may not be
			return nil, wrap(c.From.At, c, "from.ip", exitcode.UsageErrorf("%q is not an IP address", c.From.IP))
		}
		return []resolve.Ref{{Kind: resolve.KindIP, IP: ip}}, nil
	}
	ns := p.ns(c.From.Namespace)
	if c.From.Pod != "" {
		return []resolve.Ref{{Kind: resolve.KindPod, Namespace: ns, Name: c.From.Pod}}, nil
	}
	pods, err := p.ready(ctx, c.From.SelectorAt, c, "from.selector", ns, c.From.Selector)
	if err != nil {
		return nil, err
	}
	if c.From.Pick == PickFirst {
		pods = pods[:1]
	}
	refs := make([]resolve.Ref, 0, len(pods))
	for _, name := range pods {
		refs = append(refs, resolve.Ref{Kind: resolve.KindPod, Namespace: ns, Name: name})
	}
	return refs, nil
}

func (p *Planner) destination(ctx context.Context, c Case) (resolve.Ref, error) {
	ns := p.ns(c.To.Namespace)
	switch {
	case c.To.Pod != "":
		return resolve.Ref{Kind: resolve.KindPod, Namespace: ns, Name: c.To.Pod}, nil
	case c.To.Selector != "":
		pods, err := p.ready(ctx, c.To.SelectorAt, c, "to.selector", ns, c.To.Selector)
		if err != nil {
			return resolve.Ref{}, err
		}
		return resolve.Ref{Kind: resolve.KindPod, Namespace: ns, Name: pods[0]}, nil
	case c.To.Service != "":
		return resolve.Ref{Kind: resolve.KindService, Namespace: ns, Name: c.To.Service}, nil
	case c.To.Node != "":
		return resolve.Ref{Kind: resolve.KindNode, Name: c.To.Node}, nil
	}
	ip, err := netip.ParseAddr(c.To.IP)
	if err != nil { // Parse checked it; a Case built by hand may not be
		return resolve.Ref{}, wrap(c.To.At, c, "to.ip", exitcode.UsageErrorf("%q is not an IP address", c.To.IP))
	}
	return resolve.Ref{Kind: resolve.KindIP, IP: ip}, nil
}

// ready returns the names of the Ready pods of selector in ns, sorted; no
// pod at all is an error at the selector's line.
func (p *Planner) ready(ctx context.Context, at Pos, c Case, field, ns, selector string) ([]string, error) {
	pods, err := p.Pods.List(ctx, ns, selector)
	if err != nil {
		return nil, fmt.Errorf("%s: case %q: %w", at, c.Name,
			exitcode.Errorf(exitcode.Setup, "list pods in namespace %s with selector %s: %w", ns, selector, err))
	}
	var names []string
	for i := range pods {
		if podReady(&pods[i]) {
			names = append(names, pods[i].Name)
		}
	}
	if len(names) == 0 {
		return nil, wrap(at, c, field, exitcode.UsageErrorf("selector %s matches no Ready pod in namespace %s (%d pods match, none Ready): check the labels with 'kubectl get pods -n %s -l %s'",
			selector, ns, len(pods), ns, selector))
	}
	sort.Strings(names)
	return names, nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.HostNetwork {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

type endpoint struct {
	ip   netip.Addr
	port int32
}

// endpoints are the ready endpoints of the Service res resolved to, each
// with the target port behind the Service port the case traces.
func (p *Planner) endpoints(ctx context.Context, c Case, res *resolve.Result) ([]endpoint, error) {
	dst := res.Destination
	svc, err := p.Lookup.Service(ctx, dst.Namespace, dst.Name)
	if err != nil {
		return nil, wrap(c.To.ServiceAt, c, "to.service", exitcode.Errorf(exitcode.Setup, "read Service %s/%s: %w", dst.Namespace, dst.Name, err))
	}
	portName := ""
	for _, sp := range svc.Spec.Ports {
		if sp.Port == res.DstPort && protocolOf(sp.Protocol) == res.Protocol {
			portName = sp.Name
		}
	}
	slices, err := p.Lookup.EndpointSlices(ctx, dst.Namespace, dst.Name)
	if err != nil {
		return nil, wrap(c.To.ServiceAt, c, "to.service", exitcode.Errorf(exitcode.Setup, "list the endpoints of Service %s/%s: %w", dst.Namespace, dst.Name, err))
	}
	seen := map[endpoint]bool{}
	var out []endpoint
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port, ok := slicePort(s, portName, res.Protocol)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready || len(e.Addresses) == 0 {
				continue
			}
			ip, err := netip.ParseAddr(e.Addresses[0])
			if err != nil {
				continue
			}
			ep := endpoint{ip, port}
			if !seen[ep] {
				seen[ep] = true
				out = append(out, ep)
			}
		}
	}
	if len(out) == 0 {
		return nil, wrap(c.To.ServiceAt, c, "to.allEndpoints", exitcode.UsageErrorf("Service %s/%s has no ready endpoint for %s port %d: drop allEndpoints, or check its pods (kubectl get endpointslices -n %s -l %s=%s)",
			dst.Namespace, dst.Name, res.Protocol, res.DstPort, dst.Namespace, discoveryv1.LabelServiceName, dst.Name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ip.Less(out[j].ip) })
	return out, nil
}

func slicePort(s discoveryv1.EndpointSlice, name string, proto traceflow.Protocol) (int32, bool) {
	for _, sp := range s.Ports {
		if sp.Port == nil {
			continue
		}
		n := ""
		if sp.Name != nil {
			n = *sp.Name
		}
		p := corev1.ProtocolTCP
		if sp.Protocol != nil {
			p = *sp.Protocol
		}
		if n == name && protocolOf(p) == proto {
			return *sp.Port, true
		}
	}
	return 0, false
}

func protocolOf(p corev1.Protocol) traceflow.Protocol {
	if p == "" {
		return traceflow.TCP
	}
	return traceflow.Protocol(p)
}
