package engine

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Antrea's health records: cluster-scoped, one per agent (named after its
// node) and one for the controller, rewritten by each about once a minute
// (wait.Until with time.Minute in Antrea's pkg/monitor).
var (
	AgentInfoResource      = schema.GroupVersionResource{Group: "crd.antrea.io", Version: "v1beta1", Resource: "antreaagentinfos"}
	ControllerInfoResource = schema.GroupVersionResource{Group: "crd.antrea.io", Version: "v1beta1", Resource: "antreacontrollerinfos"}
)

// StaleAfter is how old the last heartbeat of an Antrea record may be, by
// the API server's clock, before the record no longer counts as proof
// that its agent or controller is alive. Antrea heartbeats every 60 s; 150 s
// tolerates one missed heartbeat plus a slow API server, and still notices
// an agent that stopped two heartbeats ago.
const StaleAfter = 150 * time.Second

// infoRecord is the part of an AntreaAgentInfo or AntreaControllerInfo the
// plugin reads: the shape is crd.antrea.io/v1beta1's (agentConditions or
// controllerConditions, each with type, status, lastHeartbeatTime, reason).
type infoRecord struct {
	metav1.ObjectMeta `json:"metadata"`
	NodeRef           struct {
		Name string `json:"name,omitempty"`
	} `json:"nodeRef"`
	// APIPort is where the agent serves its API (an agent's record only).
	APIPort              int             `json:"apiPort,omitempty"`
	AgentConditions      []infoCondition `json:"agentConditions,omitempty"`
	ControllerConditions []infoCondition `json:"controllerConditions,omitempty"`
}

type infoCondition struct {
	Type              string      `json:"type"`
	Status            string      `json:"status"`
	LastHeartbeatTime metav1.Time `json:"lastHeartbeatTime"`
	Reason            string      `json:"reason,omitempty"`
	Message           string      `json:"message,omitempty"`
}

func decodeInfo(u *unstructured.Unstructured) (infoRecord, error) {
	var r infoRecord
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return r, fmt.Errorf("decoding %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return r, nil
}

// lastWrite is when the record's heartbeat was last written, by the API
// server's clock: the time of the managedFields entry that owns the
// conditions. The API server stamps that entry with its own clock whenever
// the manager changes a field it owns, and each heartbeat changes
// lastHeartbeatTime. Where no entry owns them (managedFields stripped),
// the newest lastHeartbeatTime stands in: the clock of the node that wrote
// it, still a cluster clock and never the plugin's.
func (r infoRecord) lastWrite(field string) (time.Time, string) {
	var newest time.Time
	for _, m := range r.ManagedFields {
		if m.Time == nil || m.FieldsV1 == nil || !strings.Contains(m.FieldsV1.GetRawString(), `"f:`+field+`"`) {
			continue
		}
		if m.Time.After(newest) {
			newest = m.Time.Time
		}
	}
	if !newest.IsZero() {
		return newest, "by the API server's clock"
	}
	for _, c := range append(r.AgentConditions, r.ControllerConditions...) {
		if c.LastHeartbeatTime.After(newest) {
			newest = c.LastHeartbeatTime.Time
		}
	}
	return newest, "by its writer's heartbeat time against the API server's clock"
}

// judge says whether a record proves its component alive at serverNow:
// the healthy condition True, every connection condition that matters for
// tracing True, and the last heartbeat no older than StaleAfter. local says
// that serverNow is this machine's clock after all.
func (r infoRecord) judge(kind string, serverNow time.Time, local bool, need ...string) Health {
	field, conds := "agentConditions", r.AgentConditions
	if kind == "AntreaControllerInfo" {
		field, conds = "controllerConditions", r.ControllerConditions
	}
	written, clock := r.lastWrite(field)
	if written.IsZero() {
		return Health{Source: kind, Detail: kind + " " + r.Name + " has no heartbeat"}
	}
	if local {
		clock = "against this machine's clock (the API server sent no Date)"
	}
	age := max(serverNow.Sub(written), 0).Round(time.Second)
	h := Health{Source: kind, Age: age, Detail: fmt.Sprintf("%s %s written %s ago %s", kind, r.Name, age, clock)}
	if age > StaleAfter {
		h.Detail = fmt.Sprintf("%s %s is stale: last written %s ago %s; Antrea rewrites it every minute", kind, r.Name, age, clock)
		return h
	}
	status := map[string]infoCondition{}
	for _, c := range conds {
		status[c.Type] = c
	}
	for _, t := range need {
		c, ok := status[t]
		if !ok && t != need[0] {
			continue // an older Antrea without this condition
		}
		if c.Status != "True" {
			h.Detail = fmt.Sprintf("%s %s says %s is %q", kind, r.Name, t, c.Status)
			if c.Reason != "" || c.Message != "" {
				h.Detail += " (" + strings.TrimSpace(c.Reason+" "+c.Message) + ")"
			}
			return h
		}
	}
	h.Ready = true
	return h
}

// ServerClock remembers the API server's clock from the Date header of its
// responses, so that the age of a record is measured with server time
// against server time: a laptop whose clock is off by minutes judges
// Antrea's heartbeats exactly as one whose clock is right.
//
// It also counts the requests it sees, so that a run can say how much it
// asked of the API server.
type ServerClock struct {
	mu       sync.Mutex
	date     time.Time
	requests atomic.Int64
}

// Requests is how many API requests went through the clients c wraps.
func (c *ServerClock) Requests() int64 { return c.requests.Load() }

// Wrap is a rest.Config WrapTransport.
func (c *ServerClock) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &clockTripper{c: c, rt: rt}
}

// clockTripper notes the Date of every response. It names the round
// tripper it wraps, so that client-go can cancel a request through it when
// --request-timeout runs out (without, it logs "unable to cancel request").
type clockTripper struct {
	c  *ServerClock
	rt http.RoundTripper
}

func (t *clockTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.requests.Add(1)
	resp, err := t.rt.RoundTrip(req)
	if err == nil {
		if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			t.c.mu.Lock()
			if d.After(t.c.date) {
				t.c.date = d
			}
			t.c.mu.Unlock()
		}
	}
	return resp, err
}

// WrappedRoundTripper is k8s.io/apimachinery's utilnet.RoundTripperWrapper.
func (t *clockTripper) WrappedRoundTripper() http.RoundTripper { return t.rt }

// Now returns the API server's time as of its latest response, and false
// before any response carried a Date.
func (c *ServerClock) Now() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.date, !c.date.IsZero()
}
