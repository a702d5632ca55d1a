//go:build integration

package ovnk

import (
	"context"
	"io"
	"log"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func node(name, subnet string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{NodeSubnetsAnnotation: `{"default":["` + subnet + `"]}`}}}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func pod(ns, name, nodeName string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: nodeName}}
}

func tcpPort(p int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(p))}
}

// runController runs a controller until the returned stop is called.
func runController(t *testing.T, cs *fake.Clientset, c *central) (stop func()) {
	t.Helper()
	ctl, err := NewController(cs, c.connect(t), HairpinSNATIP, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return stop
}

// podIP waits for the controller's annotation on a pod and returns its address.
func podIP(t *testing.T, cs *fake.Clientset, ns, name string) netip.Addr {
	t.Helper()
	var ip netip.Addr
	waitFor(t, time.Minute, func() (bool, string) {
		p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ip = PodIP(p.Annotations[PodNetworksAnnotation])
		return ip.IsValid(), "pod " + ns + "/" + name + " never annotated"
	})
	return ip
}

func nbHas(t *testing.T, c *central, want string, args ...string) {
	t.Helper()
	waitFor(t, time.Minute, func() (bool, string) {
		out := strings.Join(strings.Fields(c.nbctl(t, args...)), " ") // --bare puts columns on lines
		return strings.Contains(out, want), "ovn-nbctl " + strings.Join(args, " ") + " lacks " + want + ":\n" + out
	})
}

func nbLacks(t *testing.T, c *central, unwanted string, args ...string) {
	t.Helper()
	waitFor(t, time.Minute, func() (bool, string) {
		out := c.nbctl(t, args...)
		return !strings.Contains(out, unwanted), "ovn-nbctl " + strings.Join(args, " ") + " still has " + unwanted + ":\n" + out
	})
}

func TestIntegrationTopologyAndPods(t *testing.T) {
	c := startCentral(t)
	hostNet := pod("kube-system", "hostnet", "n1", nil)
	hostNet.Spec.HostNetwork = true
	cs := fake.NewClientset(node("n1", "10.244.1.0/24"), node("n2", "10.244.2.0/24"), node("bare", ""),
		namespace("demo", nil), pod("demo", "a", "n1", nil), pod("demo", "b", "n2", nil), hostNet)
	stop := runController(t, cs, c)
	a, b := podIP(t, cs, "demo", "a"), podIP(t, cs, "demo", "b")
	if a.String() != "10.244.1.3" || b.String() != "10.244.2.3" {
		t.Errorf("addresses a=%v b=%v, want the first after gateway and management port", a, b)
	}
	nbHas(t, c, ClusterRouter, "lr-list")
	nbHas(t, c, "0a:58:0a:f4:01:01 10.244.1.1/24", "--bare", "--columns=mac,networks", "list", "Logical_Router_Port", "rtos-n1")
	nbHas(t, c, "(n2)", "ls-list")
	nbHas(t, c, `{subnet="10.244.1.0/24"}`, "get", "Logical_Switch", "n1", "other_config")
	nbHas(t, c, "router-port=rtos-n2", "--bare", "--columns=type,addresses,options", "list", "Logical_Switch_Port", "stor-n2")
	nbHas(t, c, "0a:58:0a:f4:01:02 10.244.1.2", "lsp-get-addresses", "k8s-n1")
	nbHas(t, c, "0a:58:0a:f4:01:03 10.244.1.3", "lsp-get-port-security", "demo_a")
	nbHas(t, c, `{iface-id-ver=uid-a, requested-chassis=n1}`, "get", "Logical_Switch_Port", "demo_a", "options")
	nbHas(t, c, `{namespace=demo, pod="true"}`, "get", "Logical_Switch_Port", "demo_a", "external_ids")
	nbLacks(t, c, "hostnet", "lsp-list", "n1")
	nbLacks(t, c, "bare", "ls-list")
	// A pod's route through the router: northd compiles it and ovn-trace
	// follows it to the other node's pod.
	out := c.trace(t, "n1", `inport == "demo_a" && eth.src == 0a:58:0a:f4:01:03 && eth.dst == 0a:58:0a:f4:01:01 && `+
		`ip4.src == 10.244.1.3 && ip4.dst == 10.244.2.3 && ip.ttl == 64 && tcp && tcp.dst == 80`)
	if !strings.Contains(out, `output to "demo_b"`) {
		t.Errorf("trace a -> b does not reach demo_b:\n%s", out)
	}

	// Delete b: its port goes; a new pod on n2 takes its address again.
	ctx := context.Background()
	if err := cs.CoreV1().Pods("demo").Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nbLacks(t, c, "demo_b", "lsp-list", "n2")
	if _, err := cs.CoreV1().Pods("demo").Create(ctx, pod("demo", "d", "n2", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := podIP(t, cs, "demo", "d"); d != b {
		t.Errorf("d got %v, want b's freed %v", d, b)
	}
	nbHas(t, c, "demo_d", "lsp-list", "n2")

	// A restart renumbers nobody and rewrites nothing.
	stop()
	before := c.nbctl(t, "--bare", "--columns=_uuid,name,addresses", "list", "Logical_Switch_Port")
	cs.ClearActions()
	if _, err := cs.CoreV1().Pods("demo").Create(ctx, pod("demo", "e", "n1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runController(t, cs, c)
	if e := podIP(t, cs, "demo", "e"); e.String() != "10.244.1.4" {
		t.Errorf("after restart e got %v, want 10.244.1.4 (a keeps .3)", e)
	}
	after := c.nbctl(t, "--bare", "--columns=_uuid,name,addresses", "list", "Logical_Switch_Port")
	for _, line := range strings.Split(before, "\n") {
		if !strings.Contains(after, line) {
			t.Errorf("after restart the port row %q changed", line)
		}
	}
	for _, act := range cs.Actions() {
		if act.GetVerb() == "patch" && act.(interface{ GetName() string }).GetName() != "e" {
			t.Errorf("after restart the controller patched %s", act.(interface{ GetName() string }).GetName())
		}
	}
}

func TestIntegrationServices(t *testing.T) {
	c := startCentral(t)
	cs := fake.NewClientset(node("n1", "10.244.1.0/24"), node("n2", "10.244.2.0/24"), namespace("demo", nil),
		pod("demo", "a", "n1", nil), pod("demo", "b", "n2", nil))
	runController(t, cs, c)
	a, b := podIP(t, cs, "demo", "a"), podIP(t, cs, "demo", "b")
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}, Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}, {Name: "echo", Protocol: corev1.ProtocolUDP, Port: 53}},
	}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "web-x", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{a.String()}}, {Addresses: []string{b.String()}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)},
			{Name: ptr.To("echo"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](5353)}},
	}
	if _, err := cs.CoreV1().Services("demo").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("demo").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nbHas(t, c, "10.96.0.10:80", "lb-list")
	nbHas(t, c, "10.244.1.3:8080,10.244.2.3:8080", "--bare", "--columns=vips", "find", "Load_Balancer", `name="Service_demo/web_TCP_cluster"`)
	nbHas(t, c, "10.244.1.3:5353,10.244.2.3:5353", "--bare", "--columns=vips", "find", "Load_Balancer", `name="Service_demo/web_UDP_cluster"`)
	nbHas(t, c, "k8s.ovn.org/kind=Service k8s.ovn.org/owner=demo/web", "--bare", "--columns=external_ids", "find", "Load_Balancer", `name="Service_demo/web_TCP_cluster"`)
	nbHas(t, c, "hairpin_snat_ip=169.254.169.5 fd69::5", "--bare", "--columns=options", "find", "Load_Balancer", `name="Service_demo/web_TCP_cluster"`)
	for _, sw := range []string{"n1", "n2"} {
		// ls-lb-list shortens the name at the first underscore.
		nbHas(t, c, "Service_demo/web tcp 10.96.0.10:80", "ls-lb-list", sw)
		nbHas(t, c, "Service_demo/web udp 10.96.0.10:53", "ls-lb-list", sw)
	}
	// Hairpin: a reaching itself through the VIP is DNATed to itself and
	// SNATed to the hairpin address.
	out := c.trace(t, "n1", `inport == "demo_a" && eth.src == 0a:58:0a:f4:01:03 && eth.dst == 0a:58:0a:f4:01:01 && `+
		`ip4.src == 10.244.1.3 && ip4.dst == 10.96.0.10 && ip.ttl == 64 && tcp && tcp.dst == 80`)
	if !strings.Contains(out, "ct_lb_mark") {
		t.Errorf("trace to the VIP is not load-balanced:\n%s", out)
	}

	// Endpoints going away leave the VIP with no backends (reject=true);
	// deleting the Service removes its load balancers from every switch.
	slice.Endpoints = nil
	if _, err := cs.DiscoveryV1().EndpointSlices("demo").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	nbLacks(t, c, "8080", "--bare", "--columns=vips", "find", "Load_Balancer", `name="Service_demo/web_TCP_cluster"`)
	nbHas(t, c, "10.96.0.10:80=", "--bare", "--columns=vips", "find", "Load_Balancer", `name="Service_demo/web_TCP_cluster"`)
	if err := cs.CoreV1().Services("demo").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nbLacks(t, c, "Service_demo", "lb-list")
	nbLacks(t, c, "Service_demo", "ls-lb-list", "n1")
}

// A pod deleted between the NB write and its annotation does not hold up
// the others' annotations, and a failing patch is retried.
func TestIntegrationAnnotationFailures(t *testing.T) {
	c := startCentral(t)
	cs := fake.NewClientset(node("n1", "10.244.1.0/24"), namespace("demo", nil),
		pod("demo", "gone", "n1", nil), pod("demo", "flaky", "n1", nil), pod("demo", "a", "n1", nil))
	failures := 2
	cs.PrependReactor("patch", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		switch action.(k8stesting.PatchAction).GetName() {
		case "gone":
			return true, nil, apierrors.NewNotFound(corev1.Resource("pods"), "gone")
		case "flaky":
			if failures > 0 {
				failures--
				return true, nil, apierrors.NewServiceUnavailable("try again")
			}
		}
		return false, nil, nil
	})
	runController(t, cs, c)
	podIP(t, cs, "demo", "a")
	podIP(t, cs, "demo", "flaky")
	nbHas(t, c, "demo_gone", "lsp-list", "n1")
}
