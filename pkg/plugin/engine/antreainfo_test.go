package engine

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// record loads a testdata record and sets its node, the API server's stamp
// (managedFields time) and the writer's heartbeat, and a condition's status.
func record(t *testing.T, file, name string, stamped, heartbeat time.Time, set map[string]string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetName(name)
	if _, ok := u.Object["nodeRef"]; ok && file == "antreaagentinfo.json" {
		u.Object["nodeRef"].(map[string]any)["name"] = name
	}
	mf := u.GetManagedFields()
	if stamped.IsZero() {
		mf = nil
	}
	for i := range mf {
		mf[i].Time.Time = stamped
	}
	u.SetManagedFields(mf)
	key := "agentConditions"
	if u.GetKind() == "AntreaControllerInfo" {
		key = "controllerConditions"
	}
	for _, c := range u.Object[key].([]any) {
		c := c.(map[string]any)
		c["lastHeartbeatTime"] = heartbeat.UTC().Format(time.RFC3339)
		if s, ok := set[c["type"].(string)]; ok {
			c["status"], c["reason"] = s, "Disconnected"
		}
	}
	return u
}

var infoKinds = map[schema.GroupVersionResource]string{
	AgentInfoResource:      "AntreaAgentInfoList",
	ControllerInfoResource: "AntreaControllerInfoList",
}

func TestGatherFromAntreaRecords(t *testing.T) {
	server := time.Date(2026, 11, 30, 19, 0, 40, 0, time.UTC)
	laptop := server.Add(-2 * time.Hour) // a laptop two hours behind: it must not matter
	fresh, old := server.Add(-40*time.Second), server.Add(-4*time.Minute)
	allServed := []string{"traceflows", "antreaagentinfos", "antreacontrollerinfos"}
	ctrl := func() runtime.Object {
		return record(t, "antreacontrollerinfo.json", "antrea-controller", fresh, fresh, nil)
	}
	for _, tc := range []struct {
		name      string
		objs      []runtime.Object
		served    []string
		serverNow bool
		forbid    string // a resource whose list is forbidden
		// want: per node (and "controller"), Ready and the source that said so.
		want map[string]Health
		// detail: a substring of a node's detail.
		detail map[string]string
	}{
		{name: "fresh records, pods not needed", objs: []runtime.Object{ctrl(),
			record(t, "antreaagentinfo.json", "n1", fresh, fresh, nil), record(t, "antreaagentinfo.json", "n2", fresh, fresh, nil)},
			served: allServed, serverNow: true,
			want: map[string]Health{"controller": {Ready: true, Source: "AntreaControllerInfo", Age: 40 * time.Second}, "n1": {Ready: true, Source: "AntreaAgentInfo", Age: 40 * time.Second}, "n2": {Ready: true, Source: "AntreaAgentInfo", Age: 40 * time.Second}}},
		// The agent's clock says it heartbeat just now, but the API server
		// last saw it write 4 minutes ago: the server's stamp decides.
		{name: "stale by the server's stamp whatever the agent's clock says", objs: []runtime.Object{ctrl(),
			record(t, "antreaagentinfo.json", "n1", fresh, fresh, nil), record(t, "antreaagentinfo.json", "n2", old, server, nil)},
			served: allServed, serverNow: true,
			want:   map[string]Health{"controller": {Ready: true, Source: "AntreaControllerInfo", Age: 40 * time.Second}, "n1": {Ready: true, Source: "AntreaAgentInfo", Age: 40 * time.Second}, "n2": {Source: "AntreaAgentInfo", Age: 4 * time.Minute}},
			detail: map[string]string{"n2": "AntreaAgentInfo n2 is stale: last written 4m0s ago by the API server's clock"}},
		{name: "a record missing: the pod stands in for that node only", objs: []runtime.Object{ctrl(),
			record(t, "antreaagentinfo.json", "n1", fresh, fresh, nil)},
			served: allServed, serverNow: true,
			want: map[string]Health{"controller": {Ready: true, Source: "AntreaControllerInfo", Age: 40 * time.Second}, "n1": {Ready: true, Source: "AntreaAgentInfo", Age: 40 * time.Second}, "n2": {Ready: true, Source: "pod"}}},
		{name: "OpenFlow down", objs: []runtime.Object{ctrl(),
			record(t, "antreaagentinfo.json", "n1", fresh, fresh, nil), record(t, "antreaagentinfo.json", "n2", fresh, fresh, map[string]string{"OpenflowConnectionUp": "False"})},
			served: allServed, serverNow: true,
			want:   map[string]Health{"controller": {Ready: true, Source: "AntreaControllerInfo", Age: 40 * time.Second}, "n1": {Ready: true, Source: "AntreaAgentInfo", Age: 40 * time.Second}, "n2": {Source: "AntreaAgentInfo", Age: 40 * time.Second}},
			detail: map[string]string{"n2": `says OpenflowConnectionUp is "False" (Disconnected)`}},
		{name: "the controller connection is not needed to trace", objs: []runtime.Object{ctrl(),
			record(t, "antreaagentinfo.json", "n1", fresh, fresh, map[string]string{"ControllerConnectionUp": "False"}), record(t, "antreaagentinfo.json", "n2", fresh, fresh, nil)},
			served: allServed, serverNow: true,
			want: map[string]Health{"controller": {Ready: true, Source: "AntreaControllerInfo", Age: 40 * time.Second}, "n1": {Ready: true, Source: "AntreaAgentInfo", Age: 40 * time.Second}, "n2": {Ready: true, Source: "AntreaAgentInfo", Age: 40 * time.Second}}},
		{name: "records not served (older Antrea, or the lab's own CRD): pods", served: []string{"traceflows"}, serverNow: true,
			want: map[string]Health{"controller": {Ready: true, Source: "pod"}, "n1": {Ready: true, Source: "pod"}, "n2": {Ready: true, Source: "pod"}}},
		{name: "records forbidden: pods", objs: []runtime.Object{ctrl()}, served: allServed, serverNow: true, forbid: "antreaagentinfos",
			want: map[string]Health{"controller": {Ready: true, Source: "pod"}, "n1": {Ready: true, Source: "pod"}, "n2": {Ready: true, Source: "pod"}}},
		{name: "no managedFields: the heartbeat, a cluster clock, stands in", objs: []runtime.Object{ctrl(),
			record(t, "antreaagentinfo.json", "n1", time.Time{}, old, nil), record(t, "antreaagentinfo.json", "n2", fresh, fresh, nil)},
			served: allServed, serverNow: true,
			want:   map[string]Health{"controller": {Ready: true, Source: "AntreaControllerInfo", Age: 40 * time.Second}, "n1": {Source: "AntreaAgentInfo", Age: 4 * time.Minute}, "n2": {Ready: true, Source: "AntreaAgentInfo", Age: 40 * time.Second}},
			detail: map[string]string{"n1": "heartbeat time against the API server's clock"}},
		{name: "no server time: this machine's clock, and the detail says so", objs: []runtime.Object{ctrl(),
			record(t, "antreaagentinfo.json", "n1", laptop.Add(-10*time.Second), laptop, nil), record(t, "antreaagentinfo.json", "n2", laptop, laptop, nil)},
			served: allServed, serverNow: false,
			want:   map[string]Health{"controller": {Ready: true, Source: "AntreaControllerInfo"}, "n1": {Ready: true, Source: "AntreaAgentInfo", Age: 10 * time.Second}, "n2": {Ready: true, Source: "AntreaAgentInfo"}},
			detail: map[string]string{"n1": "this machine's clock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), infoKinds, tc.objs...)
			if tc.forbid != "" {
				dyn.PrependReactor("list", tc.forbid, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: tc.forbid}, "", errors.New("rbac"))
				})
			}
			cs := fake.NewClientset(
				antreaPod("antrea-controller-1", "antrea-controller", "n1", true),
				antreaPod("antrea-agent-a", "antrea-agent", "n1", true),
				antreaPod("antrea-agent-b", "antrea-agent", "n2", true),
			)
			podLists := 0
			cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				podLists++
				return false, nil, nil
			})
			f, err := Gather(context.Background(), Sources{
				Discovery: fakeDiscovery{resources: tc.served}, Infos: dyn, Pods: cs.CoreV1().Pods(""),
				ServerNow: func() (time.Time, bool) { return server, tc.serverNow },
				LocalNow:  func() time.Time { return laptop },
			}, []string{"n1", "n2"})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Health{"controller": f.Controller}
			for n, h := range f.Agents {
				got[n] = h
			}
			for n, w := range tc.want {
				g := got[n]
				if g.Ready != w.Ready || g.Source != w.Source || g.Age != w.Age {
					t.Errorf("%s: got %+v, want Ready %v Source %q Age %s", n, g, w.Ready, w.Source, w.Age)
				}
				// The recorded agents serve their API on 10350 (the
				// record's apiPort); what pods say carries no port.
				if wantPort := map[bool]int{true: 10350}[w.Source == "AntreaAgentInfo"]; g.APIPort != wantPort {
					t.Errorf("%s: API port %d, want %d", n, g.APIPort, wantPort)
				}
				if d := tc.detail[n]; d != "" && !strings.Contains(g.Detail, d) {
					t.Errorf("%s: detail %q, want %q in it", n, g.Detail, d)
				}
			}
			allRecords := true
			for _, w := range tc.want {
				allRecords = allRecords && w.Source != "pod"
			}
			if allRecords && podLists != 0 {
				t.Errorf("pods listed although every record was there")
			}
		})
	}
}

func TestServerClockReadsDate(t *testing.T) {
	date := time.Date(2026, 11, 30, 19, 1, 2, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", date.Format(http.TimeFormat))
	}))
	defer srv.Close()
	c := &ServerClock{}
	if _, ok := c.Now(); ok {
		t.Fatal("a clock that saw no response must say so")
	}
	resp, err := (&http.Client{Transport: c.Wrap(http.DefaultTransport)}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if got, ok := c.Now(); !ok || !got.Equal(date) {
		t.Errorf("server clock %v %v, want %v", got, ok, date)
	}
}

// Antrea's records as the real Antrea v2.3.2 wrote them in the lab,
// judged at the API server's time of the recording, and again later.
func TestRecordedAntreaInfos(t *testing.T) {
	b, err := os.ReadFile("testdata/recorded-antrea-infos.json")
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	if err := list.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	recorded := time.Date(2026, 11, 30, 19, 50, 23, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		at    time.Time
		ready bool
		age   time.Duration // of the agents' records
	}{
		// The agents heartbeat at 19:49:35; antrea-controller's own entry on
		// each AntreaAgentInfo (19:47:29) owns no conditions and must not
		// date the heartbeat.
		{"at the recording", recorded, true, 48 * time.Second},
		{"three minutes later", recorded.Add(3 * time.Minute), false, 228 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), infoKinds, objs...)
			f, err := Gather(context.Background(), Sources{
				Discovery: fakeDiscovery{resources: []string{"traceflows", "antreaagentinfos", "antreacontrollerinfos"}},
				Infos:     dyn, Pods: fake.NewClientset().CoreV1().Pods(""),
				ServerNow: func() (time.Time, bool) { return tc.at, true },
			}, []string{"tf-node-1", "tf-node-2"})
			if err != nil {
				t.Fatal(err)
			}
			if f.Controller.Ready != tc.ready || f.Controller.Source != "AntreaControllerInfo" {
				t.Errorf("controller %+v", f.Controller)
			}
			for _, n := range []string{"tf-node-1", "tf-node-2"} {
				if h := f.Agents[n]; h.Ready != tc.ready || h.Source != "AntreaAgentInfo" || h.Age != tc.age {
					t.Errorf("%s: %+v, want ready %v age %s", n, h, tc.ready, tc.age)
				}
			}
		})
	}
}

// client-go cancels a request that ran past --request-timeout through the
// round trippers it wraps; the clock's must name the one it wraps, or
// client-go logs "unable to cancel request" on the user's terminal.
func TestServerClockWrapperUnwraps(t *testing.T) {
	inner := http.DefaultTransport
	w, ok := (&ServerClock{}).Wrap(inner).(utilnet.RoundTripperWrapper)
	if !ok || w.WrappedRoundTripper() != inner {
		t.Fatalf("the clock's round tripper does not unwrap to the transport it wraps")
	}
}
