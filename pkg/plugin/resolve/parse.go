// Package resolve turns what a user typed as SRC and DST into endpoints:
// first by parsing alone (no cluster), then by looking the pods and Services
// up and checking that a probe between them makes sense.
//
// The grammar of an endpoint:
//
//	NAME | pod/NAME | NAMESPACE/NAME | NAMESPACE/pod/NAME    a pod
//	svc/NAME | NAMESPACE/svc/NAME                          a Service (DST only)
//	node/NAME                                              a node, by its address
//	10.0.0.5 | fd00::5                                     an IP address (as SRC: outside the cluster)
//
// pod may also be spelled po or pods; svc may be service or services; node
// may be no or nodes (a node has no namespace). A name
// without a namespace is in the namespace of -n, or the kubeconfig context's.
package resolve

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// Kind is what an endpoint names.
type Kind int

// Kinds of endpoint.
const (
	KindPod Kind = iota + 1
	KindService
	KindIP
	KindNode
)

func (k Kind) String() string {
	switch k {
	case KindPod:
		return "pod"
	case KindService:
		return "svc"
	case KindIP:
		return "ip"
	case KindNode:
		return "node"
	}
	return "unknown"
}

// Ref is a parsed, not yet resolved, endpoint.
type Ref struct {
	Kind Kind
	// Namespace is empty when the user gave none: the default applies.
	Namespace string
	Name      string
	// IP is set for KindIP.
	IP netip.Addr
}

// String renders r in the grammar ParseDestination reads back.
func (r Ref) String() string {
	switch r.Kind {
	case KindIP:
		return r.IP.String()
	case KindNode:
		return "node/" + r.Name
	case KindService, KindPod:
		if r.Namespace != "" {
			return r.Namespace + "/" + r.Kind.String() + "/" + r.Name
		}
		return r.Kind.String() + "/" + r.Name
	}
	return ""
}

func isPodWord(w string) bool {
	switch strings.ToLower(w) {
	case "pod", "pods", "po":
		return true
	}
	return false
}

func isNodeWord(w string) bool {
	switch strings.ToLower(w) {
	case "node", "nodes", "no":
		return true
	}
	return false
}

func isServiceWord(w string) bool {
	switch strings.ToLower(w) {
	case "svc", "service", "services":
		return true
	}
	return false
}

// isOtherKind is true for kubectl resource names a user may try. They are
// not taken for a namespace in NAMESPACE/NAME, because the answer "pod not
// found in namespace deploy" would mislead.
func isOtherKind(w string) bool {
	switch strings.ToLower(w) {
	case "deploy", "deployment", "deployments", "ds", "daemonset", "daemonsets",
		"sts", "statefulset", "statefulsets", "rs", "replicaset", "replicasets",
		"job", "jobs", "cronjob", "cronjobs",
		"ep", "endpoints", "endpointslice", "endpointslices", "ing", "ingress", "ingresses":
		return true
	}
	return false
}

// ParseSource parses SRC, which must name a pod, a node or an address
// outside the cluster (a packet entering through a node's uplink).
func ParseSource(s string) (Ref, error) {
	r, err := parse("SRC", s)
	if err != nil {
		return Ref{}, err
	}
	switch r.Kind {
	case KindService:
		return Ref{}, exitcode.UsageErrorf("SRC %q is a Service, but a probe starts in a pod: give a pod as SRC (kubectl get pods -l <the Service's selector>)", s)
	}
	return r, nil
}

// ParseDestination parses DST: a pod, a Service, a node or an IP address.
func ParseDestination(s string) (Ref, error) {
	return parse("DST", s)
}

func parse(what, s string) (Ref, error) {
	if s == "" {
		return Ref{}, exitcode.UsageErrorf("%s is empty: give a pod name such as pod-a", what)
	}
	if looksLikeIP(s) {
		return parseIP(what, s)
	}
	parts := strings.Split(s, "/")
	var r Ref
	switch len(parts) {
	case 1:
		r = Ref{Kind: KindPod, Name: parts[0]}
	case 2:
		switch {
		case isPodWord(parts[0]):
			r = Ref{Kind: KindPod, Name: parts[1]}
		case isServiceWord(parts[0]):
			r = Ref{Kind: KindService, Name: parts[1]}
		case isNodeWord(parts[0]):
			r = Ref{Kind: KindNode, Name: parts[1]}
		case isOtherKind(parts[0]):
			return Ref{}, exitcode.UsageErrorf("%s %q: kubectl traceflow traces pods, Services and nodes, not %s: pick one of its pods (kubectl get pods), or write %s/pod/%s if %q is a namespace",
				what, s, parts[0], parts[0], parts[1], parts[0])
		default:
			r = Ref{Kind: KindPod, Namespace: parts[0], Name: parts[1]}
		}
	case 3:
		switch {
		case isPodWord(parts[1]):
			r = Ref{Kind: KindPod, Namespace: parts[0], Name: parts[2]}
		case isServiceWord(parts[1]):
			r = Ref{Kind: KindService, Namespace: parts[0], Name: parts[2]}
		case isNodeWord(parts[1]):
			return Ref{}, exitcode.UsageErrorf("%s %q: a node belongs to no namespace: write node/%s", what, s, parts[2])
		default:
			return Ref{}, exitcode.UsageErrorf("%s %q: the middle of NAMESPACE/KIND/NAME must be pod or svc, not %q: write e.g. %s/svc/%s", what, s, parts[1], parts[0], parts[2])
		}
	default:
		return Ref{}, exitcode.UsageErrorf("%s %q has too many '/': write NAME, pod/NAME, NAMESPACE/NAME, svc/NAME, NAMESPACE/svc/NAME or node/NAME", what, s)
	}
	if err := checkNames(what, s, r); err != nil {
		return Ref{}, err
	}
	return r, nil
}

// looksLikeIP is true for strings no pod or Service name can be: with a colon
// (IPv6), or of digits and dots only (IPv4, even a malformed one such as
// 10.0.0.256, which deserves "malformed IP" rather than "pod not found").
func looksLikeIP(s string) bool {
	if strings.Contains(s, ":") {
		return true
	}
	return strings.Contains(s, ".") && strings.Trim(s, "0123456789.") == ""
}

func parseIP(what, s string) (Ref, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return Ref{}, exitcode.UsageErrorf("%s %q is not a valid IP address: write an IPv4 address such as 10.0.0.5 or an IPv6 address such as fd00::5", what, s)
	}
	if ip.Zone() != "" {
		return Ref{}, exitcode.UsageErrorf("%s %q has a zone (%%%s), which means nothing off this machine: drop it, e.g. %s", what, s, ip.Zone(), ip.WithZone(""))
	}
	if ip.Is4In6() {
		return Ref{}, exitcode.UsageErrorf("%s %q is an IPv4-mapped IPv6 address: write the IPv4 address %s instead", what, s, ip.Unmap())
	}
	return Ref{Kind: KindIP, IP: ip}, nil
}

func checkNames(what, s string, r Ref) error {
	if r.Namespace != "" {
		if errs := validation.IsDNS1123Label(r.Namespace); len(errs) > 0 {
			return exitcode.UsageErrorf("%s %q: %q is not a valid namespace name (%s): check it with 'kubectl get namespaces'", what, s, r.Namespace, errs[0])
		}
	}
	if r.Name == "" {
		return exitcode.UsageErrorf("%s %q has no name after the '/': write e.g. %s/pod-b", what, s, strings.TrimSuffix(s, "/"))
	}
	check, noun, list := validation.IsDNS1123Subdomain, "pod", "kubectl get pods"
	switch r.Kind {
	case KindService:
		check, noun, list = validation.IsDNS1035Label, "Service", "kubectl get services"
	case KindNode:
		noun, list = "node", "kubectl get nodes"
	}
	if errs := check(r.Name); len(errs) > 0 {
		ns := ""
		if r.Namespace != "" {
			ns = " -n " + r.Namespace
		}
		return exitcode.UsageErrorf("%s %q: %q is not a valid %s name (%s): check it with '%s%s'", what, s, r.Name, noun, errs[0], list, ns)
	}
	return nil
}

// SameObject reports whether a and b certainly name the same pod (it cannot
// tell when only one gives a namespace).
func SameObject(a, b Ref) bool {
	return a.Kind == b.Kind && a.Kind != KindIP && a.Name == b.Name && a.Namespace == b.Namespace
}

// Describe renders r for messages: "pod default/pod-a".
func (r Ref) Describe(namespace string) string {
	if r.Kind == KindIP {
		return r.IP.String()
	}
	if r.Namespace != "" {
		namespace = r.Namespace
	}
	switch r.Kind {
	case KindNode:
		return "node " + r.Name
	case KindService:
		return fmt.Sprintf("Service %s/%s", namespace, r.Name)
	}
	return fmt.Sprintf("pod %s/%s", namespace, r.Name)
}
