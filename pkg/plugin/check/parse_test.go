package check

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

const head = "apiVersion: " + APIVersion + "\nkind: " + Kind + "\n"

func TestParseGood(t *testing.T) {
	s, err := Parse("shop.yaml", []byte(head+`defaults:
  namespace: shop
  port: 8080
  timeout: 5s
cases:
- name: frontend reaches api
  from: {selector: app=frontend}
  to: {service: api, allEndpoints: true}
- name: nothing reaches the database but api
  from: {selector: app=frontend, pods: all}
  to: {pod: db, namespace: data}
  port: 5432
  expect: dropped
- name: ping the gateway
  from: {pod: frontend-0}
  to: {ip: 10.244.1.1}
  protocol: ICMP
  timeout: 12
- name: dns
  from: {pod: frontend-0}
  to: {selector: k8s-app=dns, namespace: kube-system}
  protocol: UDP
  port: 53
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Case{
		{Name: "frontend reaches api", Path: "cases[0]", At: Pos{"shop.yaml", 8},
			From:     From{Namespace: "shop", Selector: "app=frontend", Pick: PickFirst, At: Pos{"shop.yaml", 9}, SelectorAt: Pos{"shop.yaml", 9}},
			To:       To{Namespace: "shop", Service: "api", AllEndpoints: true, At: Pos{"shop.yaml", 10}, ServiceAt: Pos{"shop.yaml", 10}},
			Protocol: traceflow.TCP, Port: 8080, PortAt: Pos{"shop.yaml", 5}, Expect: outcome.ExpectDelivered, Timeout: 5 * time.Second},
		{Name: "nothing reaches the database but api", Path: "cases[1]", At: Pos{"shop.yaml", 11},
			From:     From{Namespace: "shop", Selector: "app=frontend", Pick: PickAll, At: Pos{"shop.yaml", 12}, SelectorAt: Pos{"shop.yaml", 12}},
			To:       To{Namespace: "data", Pod: "db", At: Pos{"shop.yaml", 13}},
			Protocol: traceflow.TCP, Port: 5432, PortAt: Pos{"shop.yaml", 14}, Expect: outcome.ExpectDropped, Timeout: 5 * time.Second},
		{Name: "ping the gateway", Path: "cases[2]", At: Pos{"shop.yaml", 16},
			From:     From{Namespace: "shop", Pod: "frontend-0", Pick: PickFirst, At: Pos{"shop.yaml", 17}},
			To:       To{Namespace: "shop", IP: "10.244.1.1", At: Pos{"shop.yaml", 18}},
			Protocol: traceflow.ICMP, Expect: outcome.ExpectDelivered, Timeout: 12 * time.Second},
		{Name: "dns", Path: "cases[3]", At: Pos{"shop.yaml", 21},
			From:     From{Namespace: "shop", Pod: "frontend-0", Pick: PickFirst, At: Pos{"shop.yaml", 22}},
			To:       To{Namespace: "kube-system", Selector: "k8s-app=dns", At: Pos{"shop.yaml", 23}, SelectorAt: Pos{"shop.yaml", 23}},
			Protocol: traceflow.UDP, Port: 53, PortAt: Pos{"shop.yaml", 25}, Expect: outcome.ExpectDelivered, Timeout: 5 * time.Second},
	}
	if diff := cmp.Diff(want, s.Cases); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
}

func TestParseDefaultsProtocol(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		proto      traceflow.Protocol
		port       int32
	}{
		{"nothing: ICMP", "  from: {pod: a}\n  to: {pod: b}\n", traceflow.ICMP, 0},
		{"nothing to a Service: its first port", "  from: {pod: a}\n  to: {service: web}\n", "", 0},
		{"a port alone: TCP", "  from: {pod: a}\n  to: {pod: b}\n  port: 80\n", traceflow.TCP, 80},
		{"UDP and a port", "  from: {pod: a}\n  to: {pod: b}\n  protocol: udp\n  port: 53\n", traceflow.UDP, 53},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("f", []byte(head+"cases:\n- name: x\n"+tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if c := s.Cases[0]; c.Protocol != tc.proto || c.Port != tc.port {
				t.Errorf("got %q %d, want %q %d", c.Protocol, c.Port, tc.proto, tc.port)
			}
		})
	}
}

// roundTrip comes from the case, else the defaults, with the line it was
// written on; expect refused goes with it.
func TestParseRoundTrip(t *testing.T) {
	s, err := Parse("rt.yaml", []byte(head+`defaults:
  roundTrip: true
  port: 80
cases:
- name: from the defaults
  from: {pod: a}
  to: {pod: b}
- name: refused
  from: {pod: a}
  to: {pod: b}
  expect: Refused
- name: one way
  from: {pod: a}
  to: {pod: b}
  roundTrip: false
- name: dropped, one way
  from: {pod: a}
  to: {pod: b}
  roundTrip: false
  expect: dropped
`))
	if err != nil {
		t.Fatal(err)
	}
	type rt struct {
		Name      string
		RoundTrip bool
		Line      int
		Expect    outcome.Expect
	}
	var got []rt
	for _, c := range s.Cases {
		got = append(got, rt{c.Name, c.RoundTrip, c.RoundTripAt.Line, c.Expect})
	}
	want := []rt{
		{"from the defaults", true, 4, outcome.ExpectDelivered},
		{"refused", true, 4, outcome.ExpectRefused},
		{"one way", false, 17, outcome.ExpectDelivered},
		{"dropped, one way", false, 21, outcome.ExpectDropped},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cases (-want +got):\n%s", diff)
	}
	if at := s.Cases[0].RoundTripAt; at.File != "rt.yaml" {
		t.Errorf("roundTrip written in %q, want rt.yaml", at.File)
	}
}

// Every bad file names the file, the line and the field.
func TestParseBad(t *testing.T) {
	good := "- name: a\n  from: {pod: a}\n  to: {pod: b}\n  port: 80\n"
	for _, tc := range []struct {
		name, file string
		// want is the start of the error: file:line: field.
		want, says string
	}{
		{"unknown field in a case", head + "cases:\n" + good + "- name: b\n  from: {pod: a}\n  to: {pod: b}\n  prot: TCP\n",
			"f.yaml:11: cases[1].prot (case \"b\")", "unknown field"},
		{"unknown field in to", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b, sevrice: web}\n",
			"f.yaml:6: cases[0].to.sevrice (case \"a\")", "unknown field"},
		{"unknown top-level field", head + "case:\n" + good, "f.yaml:3: case", "unknown field"},
		{"missing to", head + "cases:\n- name: a\n  from: {pod: a}\n  port: 80\n", "f.yaml:4: cases[0].to (case \"a\")", "missing"},
		{"empty to", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {}\n", "f.yaml:6: cases[0].to (case \"a\")", "give one of"},
		{"port out of range", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  port: 70000\n",
			"f.yaml:7: cases[0].port (case \"a\")", "70000 is not a port"},
		{"port not a number", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  port: http\n",
			"f.yaml:7: cases[0].port (case \"a\")", "want a port number"},
		{"port zero in defaults", head + "defaults: {port: 0}\ncases:\n" + good, "f.yaml:3: defaults.port", "0 is not a port"},
		{"TCP without a port", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  protocol: TCP\n",
			"f.yaml:4: cases[0].port (case \"a\")", "TCP needs a destination port"},
		{"ICMP with a port", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  protocol: ICMP\n  port: 80\n",
			"f.yaml:8: cases[0].port (case \"a\")", "ICMP has no port"},
		{"duplicate names", head + "cases:\n" + good + good, "f.yaml:8: cases[1].name", "already the name of the case at line 4"},
		{"YAML syntax error", head + "cases:\n- name: a\n  from: {pod: a\n  to: {pod: b}\n", "f.yaml:5:", "YAML syntax"},
		{"tab indentation", head + "cases:\n\t- name: a\n", "f.yaml:4:", "YAML syntax"},
		{"bad selector", head + "cases:\n- name: a\n  from: {selector: 'app in (a'}\n  to: {pod: b}\n",
			"f.yaml:5: cases[0].from.selector (case \"a\")", "not a label selector"},
		{"pod and selector", head + "cases:\n- name: a\n  from: {pod: a, selector: app=x}\n  to: {pod: b}\n",
			"f.yaml:5: cases[0].from.selector (case \"a\")", "not both"},
		{"two destinations", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b, ip: 10.0.0.1}\n",
			"f.yaml:6: cases[0].to.ip (case \"a\")", "only one of"},
		{"allEndpoints on a pod", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b, allEndpoints: true}\n",
			"f.yaml:6: cases[0].to.allEndpoints (case \"a\")", "service destination only"},
		{"bad IP", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {ip: 10.0.0.300}\n", "f.yaml:6: cases[0].to.ip (case \"a\")", "not an IP"},
		{"bad expect", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  expect: works\n",
			"f.yaml:7: cases[0].expect (case \"a\")", "not an expectation"},
		{"bad timeout", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  timeout: 10m\n",
			"f.yaml:7: cases[0].timeout (case \"a\")", "out of range"},
		{"no name", head + "cases:\n- from: {pod: a}\n  to: {pod: b}\n", "f.yaml:4: cases[0].name", "missing"},
		{"expect refused without roundTrip", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  expect: refused\n",
			"f.yaml:7: cases[0].expect (case \"a\")", "refused needs the answer: add roundTrip: true"},
		{"expect refused with roundTrip false", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  roundTrip: false\n  expect: refused\n",
			"f.yaml:8: cases[0].expect (case \"a\")", "refused needs the answer"},
		{"defaults expect refused, roundTrip false in the case", head + "defaults: {expect: refused, roundTrip: true}\ncases:\n" + good +
			"- name: b\n  from: {pod: a}\n  to: {pod: b}\n  roundTrip: false\n",
			"f.yaml:12: cases[1].roundTrip (case \"b\")", "defaults.expect is refused"},
		{"defaults expect refused without roundTrip", head + "defaults:\n  expect: refused\ncases:\n" + good,
			"f.yaml:4: defaults.expect (case \"a\")", "add roundTrip: true to defaults"},
		{"roundTrip not a boolean", head + "cases:\n- name: a\n  from: {pod: a}\n  to: {pod: b}\n  roundTrip: maybe\n",
			"f.yaml:7: cases[0].roundTrip (case \"a\")", "want true or false"},
		{"roundTrip in defaults not a boolean", head + "defaults: {roundTrip: [true]}\ncases:\n" + good,
			"f.yaml:3: defaults.roundTrip", "want true or false, got a list"},
		{"wrong apiVersion", "apiVersion: v1\nkind: " + Kind + "\ncases:\n" + good, "f.yaml:1: apiVersion", "not known"},
		{"missing kind", "apiVersion: " + APIVersion + "\ncases:\n" + good, "f.yaml:1: kind", "missing"},
		{"no cases", head + "cases: []\n", "f.yaml:3: cases", "non-empty list"},
		{"empty file", "", "f.yaml:1:", "empty"},
		{"two documents", head + "cases:\n" + good + "---\n" + head, "f.yaml:8:", "second YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.file))
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *suite.Error", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got  %q\nwant %q... saying %q", err, tc.want, tc.says)
			}
		})
	}
}
