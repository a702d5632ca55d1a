package check

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// The fields each mapping takes; schema/check-suite.schema.json documents
// the same (a test keeps them in step).
var (
	fieldsTop      = []string{"apiVersion", "kind", "defaults", "cases"}
	fieldsDefaults = []string{"namespace", "protocol", "port", "expect", "timeout", "roundTrip"}
	fieldsCase     = []string{"name", "from", "to", "protocol", "port", "expect", "timeout", "roundTrip"}
	fieldsFrom     = []string{"namespace", "pod", "selector", "pods", "node", "ip", "via"}
	fieldsTo       = []string{"namespace", "pod", "selector", "service", "ip", "node", "allEndpoints"}
)

// Timeout bounds, as the single-trace command's --timeout.
const (
	minTimeout = time.Second
	maxTimeout = 300 * time.Second
)

// Parse reads one suite file. It reads YAML through the node API, not into
// structs, because only nodes keep the line of every field; an error names
// file:line and the field, and the first one found is returned.
func Parse(file string, data []byte) (*Suite, error) {
	doc, err := ReadDocument(file, data, fmt.Sprintf("a suite needs apiVersion %s, kind %s and cases", APIVersion, Kind), "suite")
	if err != nil {
		return nil, err
	}
	p := &parser{file: file}
	return p.suite(doc)
}

type parser struct {
	file string
	// caseName is the case being read, for errors.
	caseName string
}

func (p *parser) at(n *yaml.Node) Pos { return Pos{p.file, n.Line} }

func (p *parser) errf(n *yaml.Node, field, format string, a ...any) *Error {
	return p.errAt(p.at(n), field, format, a...)
}

// errAt is errf at a place read before, such as a default's.
func (p *parser) errAt(at Pos, field, format string, a ...any) *Error {
	e := Errorf(at, field, format, a...)
	e.Case = p.caseName
	return e
}

// fields is Fields with the parser's errors (which name the case).
func (p *parser) fields(n *yaml.Node, path string, known ...string) (map[string]*yaml.Node, error) {
	return Fields(n, path, p.errf, known...)
}

// str reads a scalar string.
func (p *parser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errf(n, field, "want a string, got %s", KindName(n))
	}
	return n.Value, nil
}

// defaults are the values every case starts from.
type defaults struct {
	namespace string
	protocol  traceflow.Protocol
	port      int32
	portAt    Pos
	expect    outcome.Expect
	expectAt  Pos
	timeout   time.Duration
	roundTrip bool
	// roundTripAt is where roundTrip was written, if it was.
	roundTripAt Pos
}

func (p *parser) suite(doc *yaml.Node) (*Suite, error) {
	root, top, err := Header(doc, p.errf, APIVersion, Kind, "a suite", fieldsTop...)
	if err != nil {
		return nil, err
	}
	d := defaults{expect: outcome.ExpectDelivered}
	if n, ok := top["defaults"]; ok {
		if d, err = p.defaults(n, d); err != nil {
			return nil, err
		}
	}
	casesNode, ok := top["cases"]
	if !ok {
		return nil, p.errf(root, "cases", "missing: list the cases to check")
	}
	if casesNode.Kind != yaml.SequenceNode || len(casesNode.Content) == 0 {
		return nil, p.errf(casesNode, "cases", "want a non-empty list of cases, got %s", KindName(casesNode))
	}
	s := &Suite{File: p.file}
	seen := map[string]Pos{}
	for i, n := range casesNode.Content {
		c, err := p.oneCase(n, fmt.Sprintf("cases[%d]", i), d)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[c.Name]; dup {
			return nil, Errorf(c.At, fmt.Sprintf("cases[%d].name", i), "%q is already the name of the case at line %d: give every case its own name", c.Name, first.Line)
		}
		seen[c.Name] = c.At
		s.Cases = append(s.Cases, c)
	}
	return s, nil
}

func (p *parser) defaults(n *yaml.Node, d defaults) (defaults, error) {
	f, err := p.fields(n, "defaults", fieldsDefaults...)
	if err != nil {
		return d, err
	}
	if v, ok := f["namespace"]; ok {
		if d.namespace, err = p.namespace(v, "defaults.namespace"); err != nil {
			return d, err
		}
	}
	if v, ok := f["protocol"]; ok {
		if d.protocol, err = p.protocol(v, "defaults.protocol"); err != nil {
			return d, err
		}
	}
	if v, ok := f["port"]; ok {
		if d.port, err = p.port(v, "defaults.port"); err != nil {
			return d, err
		}
		d.portAt = p.at(v)
	}
	if v, ok := f["expect"]; ok {
		if d.expect, err = p.expect(v, "defaults.expect"); err != nil {
			return d, err
		}
		d.expectAt = p.at(v)
	}
	if v, ok := f["timeout"]; ok {
		if d.timeout, err = p.timeout(v, "defaults.timeout"); err != nil {
			return d, err
		}
	}
	if v, ok := f["roundTrip"]; ok {
		if d.roundTrip, err = p.boolean(v, "defaults.roundTrip"); err != nil {
			return d, err
		}
		d.roundTripAt = p.at(v)
	}
	return d, nil
}

func (p *parser) namespace(n *yaml.Node, field string) (string, error) {
	v, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		return "", p.errf(n, field, "%q is not a namespace name: %s", v, errs[0])
	}
	return v, nil
}

func (p *parser) protocol(n *yaml.Node, field string) (traceflow.Protocol, error) {
	v, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	switch strings.ToUpper(v) {
	case "TCP":
		return traceflow.TCP, nil
	case "UDP":
		return traceflow.UDP, nil
	case "ICMP":
		return traceflow.ICMP, nil
	}
	return "", p.errf(n, field, "%q is not a protocol: give TCP, UDP or ICMP", v)
}

func (p *parser) port(n *yaml.Node, field string) (int32, error) {
	v, err := strconv.ParseInt(n.Value, 10, 32)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil {
		return 0, p.errf(n, field, "want a port number 1-65535, got %s (named ports are not read: give the number)", KindName(n))
	}
	if v < 1 || v > 65535 {
		return 0, p.errf(n, field, "%d is not a port: give 1-65535", v)
	}
	return int32(v), nil // ParseInt kept it within 32 bits
}

func (p *parser) expect(n *yaml.Node, field string) (outcome.Expect, error) {
	v, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	switch e := outcome.Expect(strings.ToLower(v)); e {
	case outcome.ExpectDelivered, outcome.ExpectDropped, outcome.ExpectRejected, outcome.ExpectAny, outcome.ExpectRefused:
		return e, nil
	}
	return "", p.errf(n, field, "%q is not an expectation: give delivered, dropped, rejected, any, or refused (with roundTrip)", v)
}

// boolean reads true or false, as YAML 1.2 writes them (not yes or on).
func (p *parser) boolean(n *yaml.Node, field string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, p.errf(n, field, "want true or false, got %s", KindName(n))
	}
	return strings.EqualFold(n.Value, "true"), nil
}

// timeout reads a Go duration ("10s") or a whole number of seconds.
func (p *parser) timeout(n *yaml.Node, field string) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, field, "want a duration such as 10s, got %s", KindName(n))
	}
	d, err := time.ParseDuration(n.Value)
	if secs, aerr := strconv.Atoi(n.Value); aerr == nil {
		d, err = time.Duration(secs)*time.Second, nil
	}
	if err != nil {
		return 0, p.errf(n, field, "%q is not a duration: write it as 10s or 1m", n.Value)
	}
	if d < minTimeout || d > maxTimeout {
		return 0, p.errf(n, field, "%s is out of range: give 1s to 300s", d)
	}
	return d, nil
}

func (p *parser) selector(n *yaml.Node, field string) (string, error) {
	v, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	sel, err := labels.Parse(v)
	if err != nil {
		return "", p.errf(n, field, "%q is not a label selector: %v", v, err)
	}
	if sel.Empty() {
		return "", p.errf(n, field, "an empty selector matches every pod: name the labels, e.g. app=web")
	}
	return v, nil
}

func (p *parser) objectName(n *yaml.Node, field, what string) (string, error) {
	v, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return "", p.errf(n, field, "%q is not a %s name: %s", v, what, errs[0])
	}
	return v, nil
}

// addr checks an IP address: a destination, or a source outside the
// cluster.
func (p *parser) addr(n *yaml.Node, field string) (string, error) {
	v, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	ip, err := netip.ParseAddr(v)
	if err != nil || ip.Zone() != "" {
		return "", p.errf(n, field, "%q is not an IP address", v)
	}
	return ip.String(), nil
}
