package antreaagent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// replies is an Antrea agent's API held in memory: /networkpolicies
// answers policies, every /ovsflows query answers flows.
type replies struct{ policies, flows []byte }

func (r replies) RoundTrip(req *http.Request) (*http.Response, error) {
	body := r.flows
	if req.URL.Path == "/networkpolicies" {
		body = r.policies
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
}

// FuzzRuleOf feeds the agent's replies to /networkpolicies and /ovsflows
// through RuleOf. The seeds in testdata/fuzz/FuzzRuleOf are the replies of
// a real Antrea v2.3.2 agent (testdata/fuzz/README.md). A rule found must
// name a policy the agent listed, and the second ask must give the same
// answer from what the client kept.
func FuzzRuleOf(f *testing.F) {
	f.Fuzz(func(t *testing.T, policies, flows []byte, conj uint32, table string) {
		c := &Client{Addr: "127.0.0.1:10350", token: "t", HTTP: &http.Client{Transport: replies{policies, flows}}}
		r, err := c.RuleOf(context.Background(), conj, table)
		if err != nil {
			if !errors.Is(err, ErrNotFound) && !strings.Contains(err.Error(), "Antrea's agent") {
				t.Fatalf("an error that does not say it comes from Antrea's agent: %v", err)
			}
			return
		}
		if !strings.Contains(string(policies), nameOf(r.Policy)) || r.Policy == "" {
			t.Fatalf("rule %+v names a policy the agent did not list", r)
		}
		again, err := c.RuleOf(context.Background(), conj, table)
		if err != nil || again != r {
			t.Fatalf("asked again: %+v %v, first %+v", again, err, r)
		}
	})
}

// nameOf is the policy's name in TYPE:NAME or TYPE:NAMESPACE/NAME.
func nameOf(ref string) string {
	_, s, _ := strings.Cut(ref, ":")
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
