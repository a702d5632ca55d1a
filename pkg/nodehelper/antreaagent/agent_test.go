package antreaagent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// The testdata are the answers of a real Antrea v2.3.2 agent (the lab's
// Antrea mode, node 2, 2026-12-01) with two policies applied to a pod on
// it: ACNP "multi" with three ingress rules (allow-80, drop-8080,
// drop-9090: conjunctions 2, 4 and 3, so ids do not follow the rules'
// order) and ANNP nm/rej with one (reject-7070, conjunction 5).
func fakeAgent(t *testing.T, token string, policies []byte) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if policies == nil {
		policies = read("networkpolicies.json")
	}
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"kind":"Status","message":"forbidden: User \"system:anonymous\""}`, http.StatusForbidden)
			return
		}
		q := r.URL.Query()
		switch {
		case r.URL.Path == "/networkpolicies":
			_, _ = w.Write(policies)
		case r.URL.Path == "/ovsflows" && q.Get("networkpolicy") == "multi" && q.Get("type") == "ACNP" && q.Get("namespace") == "":
			_, _ = w.Write(read("ovsflows-acnp-multi.json"))
		case r.URL.Path == "/ovsflows" && q.Get("networkpolicy") == "rej" && q.Get("type") == "ANNP" && q.Get("namespace") == "nm":
			_, _ = w.Write(read("ovsflows-annp-rej.json"))
		default:
			_, _ = w.Write([]byte("null"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func client(t *testing.T, srv *httptest.Server, token string) *Client {
	t.Helper()
	file := filepath.Join(t.TempDir(), "loopback-client-token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &Client{Addr: strings.TrimPrefix(srv.URL, "https://"), TokenFile: file, HTTP: srv.Client()}
}

func TestRuleOfNamesPolicyAndRule(t *testing.T) {
	srv, calls := fakeAgent(t, "secret", nil)
	c := client(t, srv, "secret")
	for _, tc := range []struct {
		conj         uint32
		table        string
		policy, rule string
	}{
		{4, "IngressMetric", "AntreaClusterNetworkPolicy:multi", "drop-8080"},
		{2, "AntreaPolicyIngressRule", "AntreaClusterNetworkPolicy:multi", "allow-80"},
		{3, "IngressMetric", "AntreaClusterNetworkPolicy:multi", "drop-9090"},
		{5, "IngressMetric", "AntreaNetworkPolicy:nm/rej", "reject-7070"},
	} {
		r, err := c.RuleOf(context.Background(), tc.conj, tc.table)
		if err != nil {
			t.Fatalf("conjunction %d: %v", tc.conj, err)
		}
		if r.Policy != tc.policy || r.Name != tc.rule {
			t.Errorf("conjunction %d: %+v; want %s %s", tc.conj, r, tc.policy, tc.rule)
		}
	}
	// One list and one flow dump per policy: what was learnt is kept.
	if n := calls.Load(); n != 3 {
		t.Errorf("%d requests to the agent; want 3", n)
	}
	if _, err := c.RuleOf(context.Background(), 99, "IngressMetric"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown conjunction: %v; want ErrNotFound", err)
	}
}

// Where the agent's answers do not line up (here a rule's action says
// Allow where its flow drops), the policy is named and the rule is not.
func TestRuleOfLeavesRuleUnnamedWhenUnsure(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "networkpolicies.json"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), `"action": "Drop"`, `"action": "Allow"`, 1)
	if changed == string(b) {
		t.Fatal("testdata has no Drop rule to change")
	}
	srv, _ := fakeAgent(t, "secret", []byte(changed))
	r, err := client(t, srv, "secret").RuleOf(context.Background(), 4, "IngressMetric")
	if err != nil {
		t.Fatal(err)
	}
	if r.Policy != "AntreaClusterNetworkPolicy:multi" || r.Name != "" {
		t.Errorf("%+v; want the policy and no rule", r)
	}
}

func TestRuleOfSaysWhyNot(t *testing.T) {
	srv, _ := fakeAgent(t, "secret", nil)
	_, err := client(t, srv, "wrong").RuleOf(context.Background(), 4, "IngressMetric")
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("wrong token: %v; want the agent's 403", err)
	}
	c := client(t, srv, "secret")
	c.TokenFile = filepath.Join(t.TempDir(), "missing")
	if _, err := c.RuleOf(context.Background(), 4, "IngressMetric"); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("no token file: %v; want it said", err)
	}
}

func TestParseActionFlow(t *testing.T) {
	a, ok := parseActionFlow("table=AntreaPolicyIngressRule, n_packets=0, n_bytes=0, idle_age=1, priority=14499,conj_id=4 actions=set_field:0x4->reg3,goto_table:IngressMetric")
	if !ok || a.table != "AntreaPolicyIngressRule" || a.priority != 14499 || a.conj != 4 {
		t.Errorf("%+v %v", a, ok)
	}
	if _, ok := parseActionFlow("table=AntreaPolicyIngressRule, priority=14499,tcp,tp_dst=8080 actions=conjunction(4,3/3)"); ok {
		t.Error("a clause flow taken for a rule's flow")
	}
}

// A policy whose flows the agent will not give does not hide the rule of
// another; where no policy has the id, the failure is the answer.
func TestRuleOfPastAFailingPolicy(t *testing.T) {
	srv, _ := fakeAgent(t, "secret", nil)
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("networkpolicy") == "multi" {
			http.Error(w, "query is ambiguous", http.StatusBadRequest)
			return
		}
		inner.ServeHTTP(w, r)
	})
	c := client(t, srv, "secret")
	r, err := c.RuleOf(context.Background(), 5, "IngressMetric")
	if err != nil || r.Policy != "AntreaNetworkPolicy:nm/rej" || r.Name != "reject-7070" {
		t.Errorf("%+v %v; want the ANNP's rule", r, err)
	}
	if _, err := c.RuleOf(context.Background(), 4, "IngressMetric"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("conjunction of the failing policy: %v; want its failure", err)
	}
}
