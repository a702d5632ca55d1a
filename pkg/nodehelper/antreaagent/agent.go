// Package antreaagent asks the node's Antrea agent which policy rule a
// conjunction id stands for.
//
// On Antrea's pipeline a policy rule is known to OVS by a conjunction id
// only (conj_id=N on the rule table's flow, reg3=N on a drop or reject
// rule's metric flow). The map from that id to the rule lives in the
// agent's memory. The agent serves two views of it on its API
// (v2.3.2, pkg/agent/apiserver): /networkpolicies, the policies it
// enforces with their rules (name, direction, priority, action), and
// /ovsflows?networkpolicy=NAME&type=T, the flows it installed for one
// policy, among them one conj_id=N flow per rule. The agent accepts the
// token it writes for its own antctl (/var/run/antrea/apiserver/
// loopback-client-token on the node, a hostPath in Antrea's manifest);
// the helper is handed that directory read-only and talks to the agent on
// the node's loopback address, as antctl does inside the agent's pod.
//
// A rule's name follows from the same answers: within one policy and one
// direction, Antrea gives its rules OVS priorities in the order of their
// priority (the order in which they are evaluated), so the policy's
// conj_id flows sorted by OVS priority line up with its rules sorted by
// theirs. The name is given only when that line-up is exact (as many
// flows as rules, every priority distinct, every flow's action the kind
// its rule's action says); otherwise the policy is named and the rule is
// not.
package antreaagent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
)

// TokenFile is where Antrea's agent writes the token its own antctl uses.
const TokenFile = "/var/run/antrea/apiserver/loopback-client-token" //nolint:gosec // a path, not a credential

// Rule is a policy rule as Antrea's Traceflow names it.
type Rule struct {
	// Policy is TYPE:NAME for a cluster-scoped policy and
	// TYPE:NAMESPACE/NAME for a namespaced one
	// ("AntreaClusterNetworkPolicy:deny-web", "K8sNetworkPolicy:ns/np").
	Policy string
	// Name is the rule's name, "" where the policy does not name it or the
	// agent's answers do not single it out.
	Name string
}

// Client asks one agent. It keeps what it learnt for the life of a trace:
// the policies, and every conjunction id of each policy it fetched.
type Client struct {
	// Addr is the agent's API, HOST:PORT (127.0.0.1:10350).
	Addr string
	// TokenFile holds the bearer token (TokenFile when empty).
	TokenFile string
	// HTTP defaults to a client for the agent's self-signed certificate.
	HTTP *http.Client

	mu       sync.Mutex
	token    string // read once, by RuleOf's first request
	policies []policy
	listed   bool
	fetched  map[int]bool
	rules    map[uint32]Rule
}

// policy is the part of a controlplane.antrea.io NetworkPolicy the lookup
// reads.
type policy struct {
	Rules []struct {
		Direction string `json:"direction"`
		Name      string `json:"name"`
		Priority  int32  `json:"priority"`
		Action    string `json:"action"`
	} `json:"rules"`
	SourceRef *struct {
		Type      string `json:"type"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"sourceRef"`
}

// typeShorthand is how /ovsflows's type parameter names each policy type
// (Antrea's querier.NetworkPolicyTypeMap).
var typeShorthand = map[string]string{
	"K8sNetworkPolicy":           "K8SNP",
	"AntreaClusterNetworkPolicy": "ACNP",
	"AntreaNetworkPolicy":        "ANNP",
	"AdminNetworkPolicy":         "ANP",
	"BaselineAdminNetworkPolicy": "BANP",
}

func (p policy) ref() string {
	r := p.SourceRef
	if r.Namespace == "" {
		return r.Type + ":" + r.Name
	}
	return r.Type + ":" + r.Namespace + "/" + r.Name
}

// prepare reads the token and makes the HTTP client, once; RuleOf calls
// it holding c.mu, before its requests run side by side.
func (c *Client) prepare() error {
	if c.token == "" {
		file := c.TokenFile
		if file == "" {
			file = TokenFile
		}
		b, err := os.ReadFile(file) //nolint:gosec // the operator's --antrea-token
		if err != nil {
			return fmt.Errorf("reading Antrea's agent token: %w", err)
		}
		c.token = strings.TrimSpace(string(b))
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{Transport: &http.Transport{
			// The agent's serving certificate is self-signed by default and
			// its CA is nowhere on the node at a fixed path. The connection
			// never leaves the node (loopback); Antrea's antctl does the same.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, see above
			Proxy:           nil,
			// A `check` server makes a client per trace: no idle
			// connection may outlive its request.
			DisableKeepAlives: true,
		}}
	}
	return nil
}

// get fetches path from the agent and decodes its JSON into v (prepare
// has run).
func (c *Client) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+c.Addr+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("asking Antrea's agent: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("asking Antrea's agent: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the answer of Antrea's agent to %s was %s: %s", path, resp.Status, firstLine(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decoding the answer of Antrea's agent to %s: %w", path, err)
	}
	return nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// ErrNotFound says no policy the agent enforces has the conjunction id.
var ErrNotFound = errors.New("no policy that Antrea's agent enforces has this conjunction id")

// RuleOf names the rule whose conjunction id is conj, met in table (an
// Antrea table name, which says the direction). It asks the agent for the
// policies first, then for the flows of one policy after another (those
// with a rule in table's direction first) until one has the id.
func (c *Client) RuleOf(ctx context.Context, conj uint32, table string) (Rule, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.rules[conj]; ok {
		return r, nil
	}
	if err := c.prepare(); err != nil {
		return Rule{}, err
	}
	if !c.listed {
		var list struct {
			Items []policy `json:"items"`
		}
		if err := c.get(ctx, "/networkpolicies", &list); err != nil {
			return Rule{}, err
		}
		for _, p := range list.Items {
			if p.SourceRef != nil && typeShorthand[p.SourceRef.Type] != "" {
				c.policies = append(c.policies, p)
			}
		}
		c.listed, c.fetched, c.rules = true, map[int]bool{}, map[uint32]Rule{}
	}
	// The agent dumps a policy's flows one ovs-ofctl call per flow (about
	// 0.3 s for a policy of three rules on the lab's nodes): policies are
	// asked about a few at a time.
	var todo []int
	for _, i := range c.order(direction(table), table) {
		if !c.fetched[i] {
			todo = append(todo, i)
		}
	}
	var failed error
	for len(todo) > 0 {
		batch := todo[:min(len(todo), parallelFetches)]
		todo = todo[len(batch):]
		got := make([]map[uint32]Rule, len(batch))
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for k, i := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[k], errs[k] = c.load(ctx, c.policies[i])
			}()
		}
		wg.Wait()
		for k, i := range batch {
			if errs[k] != nil {
				// Another policy may still hold the id; the first failure
				// is the answer only if none does.
				if failed == nil {
					failed = errs[k]
				}
				continue
			}
			c.fetched[i] = true
			for id, r := range got[k] {
				c.rules[id] = r
			}
		}
		if r, ok := c.rules[conj]; ok {
			return r, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	if failed != nil {
		return Rule{}, failed
	}
	return Rule{}, ErrNotFound
}

// parallelFetches is how many policies' flows are asked for at once.
const parallelFetches = 4

// order lists the policies to ask about: those with a rule in dir first,
// of the kind table belongs to (Antrea-native tables hold Antrea-native
// policies' rules; IngressRule and EgressRule Kubernetes ones') first.
func (c *Client) order(dir, table string) []int {
	native := strings.HasPrefix(table, "AntreaPolicy") || strings.HasSuffix(table, "Metric")
	rank := func(p policy) int {
		r := 0
		has := false
		for _, rule := range p.Rules {
			if rule.Direction == dir {
				has = true
			}
		}
		if !has {
			r += 2
		}
		if (p.SourceRef.Type == "K8sNetworkPolicy") == native {
			r++
		}
		return r
	}
	idx := make([]int, len(c.policies))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return rank(c.policies[idx[a]]) < rank(c.policies[idx[b]]) })
	return idx
}
