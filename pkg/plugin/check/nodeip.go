package check

// Sources and destinations beyond pods, as a single trace takes them: a
// node's own traffic (from: {node: NAME}, as SRC node/NAME), a node's
// address (to: {node: NAME}, as DST node/NAME), and an address outside the
// cluster whose packet arrives on a node's uplink (from: {ip: ADDR, via:
// NODE}, as SRC ADDR with --via node/NODE). What the file alone shows is
// refused here, with the line; what needs the cluster (which Service a
// NodePort or an externalIP belongs to, whether the via node is Ready) is
// refused by resolution when the suite is planned.

import (
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// nodeName reads a node's name, written NAME or node/NAME (node, nodes
// or no, in any case, as --via takes it).
func (p *parser) nodeName(n *yaml.Node, field string) (string, error) {
	v, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	name := v
	if kind, rest, ok := strings.Cut(v, "/"); ok {
		switch strings.ToLower(kind) {
		case "node", "nodes", "no":
			name = rest
		default:
			return "", p.errf(n, field, "%q is not a node: give the node's name, as 'kubectl get nodes' lists it (NAME or node/NAME)", v)
		}
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", p.errf(n, field, "%q is not a node name: %s", v, errs[0])
	}
	return name, nil
}

// fromNamespace is the namespace of a source of kind: its own, else the
// defaults' (ns). A node and an address outside the cluster have none, so
// a namespace written for them is refused rather than ignored.
func (p *parser) fromNamespace(f map[string]*yaml.Node, path, kind, ns string) (string, error) {
	v, ok := f["namespace"]
	switch {
	case kind == "node" && ok:
		return "", p.errf(v, join(path, "namespace"), "a node has no namespace: drop namespace")
	case kind == "ip" && ok:
		return "", p.errf(v, join(path, "namespace"), "an address outside the cluster has no namespace: drop namespace")
	case kind == "node" || kind == "ip":
		return "", nil
	case ok:
		return p.namespace(v, join(path, "namespace"))
	}
	return ns, nil
}

// via reads the node whose uplink receives a packet from outside: it goes
// with ip only, as --via goes with an IP SRC only.
func (p *parser) via(out *From, f map[string]*yaml.Node, path string) error {
	v, ok := f["via"]
	if !ok {
		return nil
	}
	field := join(path, "via")
	if out.IP == "" {
		return p.errf(v, field, "says which node's uplink receives a packet from outside the cluster, so it goes with ip only: drop via, or give ip: ADDR")
	}
	out.ViaAt = p.at(v)
	var err error
	out.Via, err = p.nodeName(v, field)
	return err
}

// ends checks the source against the rest of its case, as the single
// trace checks SRC and DST before it connects: a node is not traced to
// itself, and from outside a packet reaches a Service through a node's
// address (its NodePort, on that node's own uplink) or an externalIP or
// LoadBalancer IP (on the via node's), on a TCP or UDP port, in the
// source's family.
func (p *parser) ends(c *Case, f map[string]*yaml.Node, path string, n *yaml.Node) error {
	from, to := c.From, c.To
	if from.Node != "" && from.Node == to.Node {
		return p.errf(f["to"], join(path, "to.node"), "the source and the destination are the same node %s: trace to another node, a pod, a Service or an IP", to.Node)
	}
	if from.IP == "" {
		return nil
	}
	src := netip.MustParseAddr(from.IP) // from read it
	proto, protoAt := f["protocol"]
	if !protoAt {
		proto = n
	}
	switch {
	case to.Node == "" && to.IP == "":
		return p.errf(f["to"], join(path, "to"), "from outside (from.ip %s) a packet reaches a Service through its NodePort (to: {node: NAME}, port: the NodePort), an externalIP or a LoadBalancer IP (to: {ip: ADDR}, with from.via), not a %s directly", src, destinationKind(to))
	case c.Protocol != traceflow.TCP && c.Protocol != traceflow.UDP:
		return p.errf(proto, join(path, "protocol"), "from outside (from.ip %s) a packet reaches a Service on a port: give protocol TCP or UDP and port (the NodePort for to.node, the Service's port for an externalIP or LoadBalancer IP)", src)
	case to.IP != "" && netip.MustParseAddr(to.IP).Is6() != src.Is6():
		return p.errf(f["to"], join(path, "to.ip"), "from.ip %s and to.ip %s are of different IP families: give two IPv4 or two IPv6 addresses", src, to.IP)
	case to.Node != "" && from.Via != "" && from.Via != to.Node:
		return p.errAt(from.ViaAt, join(path, "from.via"), "node %s: the packet to node %s's address arrives on %s's own uplink: drop via, or give %s", from.Via, to.Node, to.Node, to.Node)
	}
	return nil
}

// destinationKind names what to is, for messages.
func destinationKind(to To) string {
	switch {
	case to.Service != "":
		return "Service"
	case to.Selector != "":
		return "selector's pod"
	}
	return "pod"
}
