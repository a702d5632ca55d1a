package check

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
)

func pod(name, ip string, labels map[string]string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func cluster() []runtime.Object {
	front := map[string]string{"app": "front"}
	return []runtime.Object{
		pod("front-b", "10.0.1.2", front, true),
		pod("front-a", "10.0.1.1", front, true),
		pod("front-c", "10.0.1.3", front, false), // not Ready: never picked
		pod("api-1", "10.0.2.1", map[string]string{"app": "api"}, true),
		pod("api-2", "10.0.2.2", map[string]string{"app": "api"}, true),
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.5", Ports: []corev1.ServicePort{
				{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090},
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "api-x", Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))},
				{Name: ptr.To("metrics"), Port: ptr.To(int32(9100))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.0.2.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
				{Addresses: []string{"10.0.2.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
				{Addresses: []string{"10.0.2.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			},
		},
	}
}

func plan(t *testing.T, body string) ([]Trace, error) {
	t.Helper()
	s, err := Parse("s.yaml", []byte("apiVersion: "+APIVersion+"\nkind: "+Kind+"\ndefaults: {namespace: shop}\ncases:\n"+body))
	if err != nil {
		t.Fatal(err)
	}
	cs := fake.NewClientset(cluster()...)
	p := &Planner{Lookup: resolve.FromClientset(cs), Pods: PodsFromClientset(cs), Namespace: "default", DefaultTimeout: 10 * time.Second}
	return p.Plan(context.Background(), []*Suite{s})
}

func TestPlanExpands(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		// want is each trace's name, source, destination IP and port.
		want []string
	}{
		{"a selector picks the first Ready pod by name", "- name: c\n  from: {selector: app=front}\n  to: {pod: api-1}\n  port: 80\n",
			[]string{"c shop/front-a 10.0.2.1:80"}},
		{"pods: all is every Ready pod", "- name: c\n  from: {selector: app=front, pods: all}\n  to: {selector: app=api}\n  port: 80\n",
			[]string{"c [from shop/front-a] shop/front-a 10.0.2.1:80", "c [from shop/front-b] shop/front-b 10.0.2.1:80"}},
		{"allEndpoints adds each endpoint at its target port", "- name: c\n  from: {pod: front-a}\n  to: {service: api, allEndpoints: true}\n  port: 80\n",
			[]string{"c shop/front-a 10.96.0.5:80", "c [endpoint 10.0.2.1:8080] shop/front-a 10.0.2.1:8080", "c [endpoint 10.0.2.2:8080] shop/front-a 10.0.2.2:8080"}},
		{"allEndpoints of the Service's first port", "- name: c\n  from: {pod: front-a}\n  to: {service: api, allEndpoints: true}\n",
			[]string{"c shop/front-a 10.96.0.5:9090", "c [endpoint 10.0.2.1:9100] shop/front-a 10.0.2.1:9100", "c [endpoint 10.0.2.2:9100] shop/front-a 10.0.2.2:9100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			traces, err := plan(t, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tr := range traces {
				r := tr.Result
				got = append(got, strings.Join([]string{tr.Name, r.Source.Namespace + "/" + r.Source.Name,
					r.Destination.IP.String() + ":" + itoa(r.DstPort)}, " "))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func TestPlanErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"selector without a Ready pod", "- name: c\n  from: {pod: front-a}\n  to: {selector: app=api, namespace: shop}\n  port: 80\n  expect: any\n- name: d\n  from: {selector: app=none}\n  to: {pod: api-1}\n",
			`s.yaml:11: cases[1].from.selector (case "d"): selector app=none matches no Ready pod in namespace shop`},
		{"a Service port it does not expose", "- name: c\n  from: {pod: front-a}\n  to: {service: api}\n  port: 81\n",
			`s.yaml:5: cases[0] (case "c"): Service shop/api does not expose TCP port 81`},
		{"the same pod", "- name: c\n  from: {pod: api-1}\n  to: {selector: app=api}\n  port: 80\n",
			`s.yaml:7: cases[0].to (case "c"): the source and the destination are the same pod`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plan(t, tc.body)
			if exitcode.Of(err) != exitcode.Usage || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v (exit %d), want exit 1 starting %q", err, exitcode.Of(err), tc.want)
			}
		})
	}
}

func TestCodeIsTheWorst(t *testing.T) {
	for _, tc := range []struct {
		codes []exitcode.Code
		want  exitcode.Code
	}{
		{nil, 0},
		{[]exitcode.Code{0, 0}, 0},
		{[]exitcode.Code{0, 2, 0}, 2},
		{[]exitcode.Code{2, 3, 2}, 3},
		{[]exitcode.Code{3, 4, 2}, 4},
		{[]exitcode.Code{2, 1}, 4}, // a usage error mid-run is no promise that nothing was created
	} {
		var rs []Result
		for _, c := range tc.codes {
			rs = append(rs, Result{Code: c})
		}
		if got := Code(rs); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.codes, got, tc.want)
		}
	}
}

// The runner never runs more traces at once than Parallel allows (a
// round trip takes two slots: it holds two tags), runs every one, and
// keeps the order of the results. Concurrency is shown with channels, not
// sleeps: every trace blocks until the test releases it, and the test
// releases one only once the allowed number of them are running, so the
// run reaches that number at once (or hangs) and a runner without a bound
// would start one more while they wait.
func TestRunnerBoundsConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		parallel, total, peak int
		roundTrip             bool
	}{
		{"one way", 3, 20, 3, false},
		{"round trips take two slots", 4, 9, 2, true},
		{"a round trip at Parallel 1", 1, 3, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			traces := make([]Trace, tc.total)
			for i := range traces {
				traces[i].Name, traces[i].Case.RoundTrip = strconv.Itoa(i), tc.roundTrip
			}
			runBounded(t, tc.parallel, tc.peak, traces)
		})
	}
}

func runBounded(t *testing.T, parallel, want int, traces []Trace) {
	total := len(traces)
	var now, peak atomic.Int32
	entered := make(chan struct{})
	release := make(chan struct{})
	r := &Runner{Parallel: parallel, Now: time.Now, Run: func(_ context.Context, tr Trace) Result {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		entered <- struct{}{}
		<-release
		now.Add(-1) // before the runner frees the slot: the next trace cannot count this one
		return Result{Ended: outcome.Ended{Verdict: outcome.Verdict(tr.Name)}}
	}}
	var mu sync.Mutex
	started, ended := 0, 0
	r.Progress = func(_ int, res *Result) {
		mu.Lock()
		defer mu.Unlock()
		if res == nil {
			started++
		} else {
			ended++
		}
	}
	done := make(chan []Result, 1)
	go func() { done <- r.RunAll(context.Background(), traces) }()
	running := 0
	for in := 0; in < total; {
		select {
		case <-entered:
		case <-time.After(time.Minute): // ends a hung wait only
			t.Fatalf("%d traces running, %d started in all: the runner does not start up to %d at once", running, in, want)
		}
		in++
		running++
		if running == want || in == total {
			release <- struct{}{}
			running--
		}
	}
	for ; running > 0; running-- {
		release <- struct{}{}
	}
	rs := <-done
	if p := peak.Load(); int(p) != want {
		t.Errorf("peak concurrency %d, want %d", p, want)
	}
	for i, res := range rs {
		if string(res.Verdict) != traces[i].Name {
			t.Errorf("result %d is %q", i, res.Verdict)
		}
	}
	if started != total || ended != total {
		t.Errorf("progress heard %d starts and %d ends, want %d each", started, ended, total)
	}
}

// Traces not started when the run is interrupted are not run, and count as
// not completed.
func TestRunnerStopsStartingWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	traces := make([]Trace, 5)
	ran := 0
	r := &Runner{Parallel: 1, Now: time.Now, Run: func(ctx context.Context, _ Trace) Result {
		ran++
		cancel()
		<-ctx.Done()
		return Result{Ended: outcome.Ended{Verdict: outcome.Incomplete}, Code: exitcode.Timeout, Err: errors.New("interrupted")}
	}}
	rs := r.RunAll(ctx, traces)
	if ran != 1 {
		t.Errorf("%d traces ran, want 1", ran)
	}
	for i, res := range rs {
		if res.Code != exitcode.Timeout {
			t.Errorf("trace %d: exit %d, want 3", i, res.Code)
		}
	}
}
