package cli

import (
	"bytes"
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/goldenfile"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// result is what one run of the command did.
type result struct {
	stdout, stderr string
	err            error
	// connected is whether the command asked for cluster clients at all.
	connected bool
	kube      *fake.Clientset
	dyn       *dynamicfake.FakeDynamicClient
}

// writes lists the API calls that changed something.
func (r *result) writes() []string {
	var out []string
	var actions []k8stesting.Action
	if r.kube != nil {
		actions = append(actions, r.kube.Actions()...)
	}
	if r.dyn != nil {
		actions = append(actions, r.dyn.Actions()...)
	}
	for _, a := range actions {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

// runCommand runs `kubectl traceflow args...` against fake clients holding
// objs, with a fixed name suffix, no terminal and no environment.
func runCommand(t testing.TB, args []string, objs ...runtime.Object) *result {
	t.Helper()
	return runCommandWith(t, args, nil, objs...)
}

// runCommandWith is runCommand with a hook to add reactors to the fake
// clientset before the command runs.
func runCommandWith(t testing.TB, args []string, setup func(*fake.Clientset), objs ...runtime.Object) *result {
	t.Helper()
	res := &result{}
	var stdout, stderr bytes.Buffer
	deps := Deps{
		Connect: func(cf *genericclioptions.ConfigFlags) (*Clients, error) {
			res.connected = true
			ns := "default"
			if cf.Namespace != nil && *cf.Namespace != "" {
				ns = *cf.Namespace
			}
			res.kube = fake.NewClientset(objs...)
			if setup != nil {
				setup(res.kube)
			}
			res.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{
					traceflow.GroupVersionResource: traceflow.ListKind,
					traceflow.CRDsResource:         "CustomResourceDefinitionList",
				})
			return &Clients{Namespace: ns, Lookup: resolve.FromClientset(res.kube),
				Traceflows: traceflow.NewClient(res.dyn, nil), Dynamic: res.dyn, Kube: res.kube}, nil
		},
		Suffix:     func() string { return "x7k2q" },
		IsTerminal: func(any) bool { return false },
		Getenv:     func(string) string { return "" },
	}
	cmd := NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr}, deps)
	cmd.SetArgs(args)
	res.err = cmd.ExecuteContext(context.Background())
	res.stdout, res.stderr = stdout.String(), stderr.String()
	return res
}

func runningPod(ns, name, node string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ips[0]},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// demoCluster is pod-a and pod-b of the issue, plus what the other cases
// need.
func demoCluster() []runtime.Object {
	ready := true
	pending := runningPod("default", "pending", "node-1", "10.244.1.6")
	pending.Status.Phase = corev1.PodPending
	return []runtime.Object{
		runningPod("default", "pod-a", "node-1", "10.244.1.5", "fd00:10:244:1::5"),
		runningPod("default", "pod-b", "node-2", "10.244.2.7", "fd00:10:244:2::7"),
		runningPod("demo", "pod-c", "node-2", "10.244.2.8"),
		pending,
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dns"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.53", ClusterIPs: []string{"10.96.0.53"},
				Ports: []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "headless"},
			Spec: corev1.ServiceSpec{ClusterIP: "None",
				Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}},
		},
		// What `kubectl traceflow install` made: the helper namespace.
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "traceflow-system",
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}},
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name, []byte(got))
}
