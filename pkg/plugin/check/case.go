package check

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func (p *parser) oneCase(n *yaml.Node, path string, d defaults) (Case, error) {
	p.caseName = ""
	defer func() { p.caseName = "" }()
	// Name the case in every error about it, even one before its name.
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Value == "name" && v.Kind == yaml.ScalarNode {
			p.caseName = v.Value
		}
	}
	f, err := p.fields(n, path, fieldsCase...)
	if err != nil {
		return Case{}, err
	}
	c := Case{Path: path, At: p.at(n), Expect: d.expect, Timeout: d.timeout}
	nameNode, ok := f["name"]
	if !ok {
		return c, p.errf(n, join(path, "name"), "missing: every case has a name, which the report and JUnit show")
	}
	if c.Name, err = p.str(nameNode, join(path, "name")); err != nil {
		return c, err
	}
	if strings.TrimSpace(c.Name) == "" {
		return c, p.errf(nameNode, join(path, "name"), "empty: every case has a name")
	}
	p.caseName = c.Name
	fromNode, ok := f["from"]
	if !ok {
		return c, p.errf(n, join(path, "from"), "missing: say where the probe starts (pod, selector, node or ip)")
	}
	if c.From, err = p.from(fromNode, join(path, "from"), d.namespace); err != nil {
		return c, err
	}
	toNode, ok := f["to"]
	if !ok {
		return c, p.errf(n, join(path, "to"), "missing: say where the probe goes (pod, selector, service, ip or node)")
	}
	if c.To, err = p.to(toNode, join(path, "to"), d.namespace); err != nil {
		return c, err
	}
	if v, ok := f["expect"]; ok {
		if c.Expect, err = p.expect(v, join(path, "expect")); err != nil {
			return c, err
		}
	}
	if v, ok := f["timeout"]; ok {
		if c.Timeout, err = p.timeout(v, join(path, "timeout")); err != nil {
			return c, err
		}
	}
	if err := p.roundTrip(&c, f, path, d); err != nil {
		return c, err
	}
	if err := p.packet(&c, f, path, d, n); err != nil {
		return c, err
	}
	return c, p.ends(&c, f, path, n)
}

// roundTrip reads whether the case follows the answer (its own
// roundTrip, else the defaults'), and refuses expect refused without it:
// only an answer can refuse, as --expect refused needs --round-trip. The
// error points at what the case wrote itself, else at the defaults.
func (p *parser) roundTrip(c *Case, f map[string]*yaml.Node, path string, d defaults) error {
	c.RoundTrip, c.RoundTripAt = d.roundTrip, d.roundTripAt
	rt, own := f["roundTrip"]
	if own {
		var err error
		if c.RoundTrip, err = p.boolean(rt, join(path, "roundTrip")); err != nil {
			return err
		}
		c.RoundTripAt = p.at(rt)
	}
	if c.Expect != outcome.ExpectRefused || c.RoundTrip {
		return nil
	}
	if e, ok := f["expect"]; ok {
		return p.errf(e, join(path, "expect"), "refused needs the answer: add roundTrip: true (to the case or to defaults)")
	}
	if own {
		return p.errf(rt, join(path, "roundTrip"), "defaults.expect is refused, which needs the answer: drop roundTrip: false, or give the case an expect of its own")
	}
	return p.errAt(d.expectAt, "defaults.expect", "refused needs the answer: add roundTrip: true to defaults (or to every case)")
}

// packet decides the protocol and port from the case, then the defaults.
// A port alone means TCP; nothing at all means ICMP, or a Service's first
// port, as on the command line.
func (p *parser) packet(c *Case, f map[string]*yaml.Node, path string, d defaults, n *yaml.Node) error {
	var err error
	protoNode, hasProto := f["protocol"]
	if hasProto {
		if c.Protocol, err = p.protocol(protoNode, join(path, "protocol")); err != nil {
			return err
		}
	}
	portNode, hasPort := f["port"]
	if hasPort {
		if c.Port, err = p.port(portNode, join(path, "port")); err != nil {
			return err
		}
		c.PortAt = p.at(portNode)
	}
	if !hasProto && !hasPort {
		c.Protocol, c.Port, c.PortAt = d.protocol, d.port, d.portAt
	} else if !hasProto {
		c.Protocol = d.protocol
	} else if !hasPort && c.Protocol != traceflow.ICMP && d.protocol != traceflow.ICMP {
		c.Port, c.PortAt = d.port, d.portAt
	}
	if c.Protocol == "" && c.Port != 0 {
		c.Protocol = traceflow.TCP
	}
	service := c.To.Service != ""
	switch {
	case c.Protocol == traceflow.ICMP && c.Port != 0:
		at := n
		if hasPort {
			at = portNode
		}
		return p.errf(at, join(path, "port"), "ICMP has no port: drop port, or give protocol TCP or UDP")
	case c.Protocol == traceflow.ICMP && service:
		return p.errf(n, join(path, "protocol"), "a Service load-balances ports, not ICMP: give TCP or UDP and a port, or leave both out for its first port")
	case (c.Protocol == traceflow.TCP || c.Protocol == traceflow.UDP) && c.Port == 0 && !service:
		return p.errf(n, join(path, "port"), "missing: %s needs a destination port", c.Protocol)
	case c.Protocol == "" && !service:
		c.Protocol = traceflow.ICMP
	}
	return nil
}

// fromKinds and toKinds are what a source and a destination can be, one
// of each; the schema's oneOf lists the same (a test keeps them in step).
var (
	fromKinds = []string{"pod", "selector", "node", "ip"}
	toKinds   = []string{"pod", "selector", "service", "ip", "node"}
)

func (p *parser) from(n *yaml.Node, path, ns string) (From, error) {
	f, err := p.fields(n, path, fieldsFrom...)
	if err != nil {
		return From{}, err
	}
	out := From{Pick: PickFirst, At: p.at(n)}
	kind, err := p.kind(n, f, path, fromKinds,
		"pod: NAME, selector: LABELS (the first Ready pod by name, or pods: all), node: NAME (its own traffic) or ip: ADDR (outside the cluster)")
	if err != nil {
		return out, err
	}
	if out.Namespace, err = p.fromNamespace(f, path, kind, ns); err != nil {
		return out, err
	}
	v, field := f[kind], join(path, kind)
	switch kind {
	case "pod":
		out.Pod, err = p.objectName(v, field, "pod")
	case "selector":
		out.SelectorAt = p.at(v)
		out.Selector, err = p.selector(v, field)
	case "node":
		out.Node, err = p.nodeName(v, field)
	case "ip":
		out.IP, err = p.addr(v, field)
	}
	if err != nil {
		return out, err
	}
	if v, ok := f["pods"]; ok {
		if kind != "selector" {
			return out, p.errf(v, join(path, "pods"), "applies to a selector only")
		}
		s, err := p.str(v, join(path, "pods"))
		if err != nil {
			return out, err
		}
		switch Pick(s) {
		case PickFirst, PickAll:
			out.Pick = Pick(s)
		default:
			return out, p.errf(v, join(path, "pods"), "%q: give first (the first Ready pod by name) or all", s)
		}
	}
	return out, p.via(&out, f, path)
}

// kind is which one of kinds the mapping n (read into f) gives; the error
// is at the second one given, or at n, saying what to give (hint), when
// none is.
func (p *parser) kind(n *yaml.Node, f map[string]*yaml.Node, path string, kinds []string, hint string) (string, error) {
	var got []string
	for _, k := range kinds {
		if _, ok := f[k]; ok {
			got = append(got, k)
		}
	}
	switch len(got) {
	case 0:
		return "", p.errf(n, path, "give one of %s", hint)
	case 1:
		return got[0], nil
	}
	return "", p.errf(f[got[1]], join(path, got[1]), "give only one of %s, not both %s and %s",
		strings.Join(kinds[:len(kinds)-1], ", ")+" and "+kinds[len(kinds)-1], got[0], got[1])
}

func (p *parser) to(n *yaml.Node, path, ns string) (To, error) {
	f, err := p.fields(n, path, fieldsTo...)
	if err != nil {
		return To{}, err
	}
	out := To{Namespace: ns, At: p.at(n)}
	if v, ok := f["namespace"]; ok {
		if out.Namespace, err = p.namespace(v, join(path, "namespace")); err != nil {
			return out, err
		}
	}
	kind, err := p.kind(n, f, path, toKinds,
		"pod: NAME, selector: LABELS (its first Ready pod by name), service: NAME, ip: ADDR or node: NAME (the node's address)")
	if err != nil {
		return out, err
	}
	if v, ok := f["namespace"]; ok && kind == "node" {
		return out, p.errf(v, join(path, "namespace"), "a node has no namespace: drop namespace")
	}
	v, field := f[kind], join(path, kind)
	switch kind {
	case "pod":
		out.Pod, err = p.objectName(v, field, "pod")
	case "selector":
		out.SelectorAt = p.at(v)
		out.Selector, err = p.selector(v, field)
	case "service":
		out.ServiceAt = p.at(v)
		out.Service, err = p.objectName(v, field, "Service")
	case "ip":
		out.IP, err = p.addr(v, field)
	case "node":
		out.Namespace = ""
		out.Node, err = p.nodeName(v, field)
	}
	if err != nil {
		return out, err
	}
	if v, ok := f["allEndpoints"]; ok {
		if out.AllEndpoints, err = p.boolean(v, join(path, "allEndpoints")); err != nil {
			return out, err
		}
		if out.AllEndpoints && out.Service == "" {
			return out, p.errf(v, join(path, "allEndpoints"), "applies to a service destination only")
		}
	}
	return out, nil
}
