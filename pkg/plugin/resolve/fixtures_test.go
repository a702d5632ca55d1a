package resolve

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func pod(ns, name, node string, phase corev1.PodPhase, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for i, ip := range ips {
		if i == 0 {
			p.Status.PodIP = ip
		}
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func service(ns, name string, clusterIPs []string, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{ClusterIPs: clusterIPs, Ports: ports},
	}
	if len(clusterIPs) > 0 {
		s.Spec.ClusterIP = clusterIPs[0]
	}
	return s
}

func port(name string, proto corev1.Protocol, p int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: p}
}

func slice(ns, svc string, family discoveryv1.AddressType, ready bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-" + string(family), Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: family,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
}

// clusterObjects is the small cluster the resolution tests run against.
func node(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func clusterObjects() []runtime.Object {
	hostNet := pod("default", "host-pod", "node-1", corev1.PodRunning, "192.168.0.11")
	hostNet.Spec.HostNetwork = true
	terminating := pod("default", "leaving", "node-1", corev1.PodRunning, "10.244.1.9")
	terminating.DeletionTimestamp = &metav1.Time{}
	headless := service("default", "headless", []string{"None"}, port("http", corev1.ProtocolTCP, 80))
	external := service("default", "external", nil, port("http", corev1.ProtocolTCP, 80))
	external.Spec.Type = corev1.ServiceTypeExternalName
	external.Spec.ExternalName = "example.com"
	return []runtime.Object{
		pod("default", "pod-a", "node-1", corev1.PodRunning, "10.244.1.5", "fd00:1::5"),
		pod("default", "pod-b", "node-2", corev1.PodRunning, "10.244.2.7"),
		pod("demo", "pod-c", "node-2", corev1.PodRunning, "10.244.2.8", "fd00:2::8"),
		pod("default", "pending", "", corev1.PodPending),
		pod("default", "no-ip", "node-1", corev1.PodRunning),
		hostNet, terminating, headless, external,
		service("default", "web", []string{"10.96.0.10"}, port("http", corev1.ProtocolTCP, 80), port("dns", corev1.ProtocolUDP, 53)),
		slice("default", "web", discoveryv1.AddressTypeIPv4, true),
		service("demo", "dual", []string{"10.96.0.20", "fd00:96::20"}, port("", "", 8080)),
		slice("demo", "dual", discoveryv1.AddressTypeIPv4, true),
		slice("demo", "dual", discoveryv1.AddressTypeIPv6, true),
		service("default", "empty", []string{"10.96.0.30"}, port("http", corev1.ProtocolTCP, 80)),
		slice("default", "empty", discoveryv1.AddressTypeIPv4, false),
		service("default", "sctp", []string{"10.96.0.40"}, port("s", corev1.ProtocolSCTP, 9999), port("t", corev1.ProtocolTCP, 80)),
		service("default", "portless", []string{"10.96.0.50"}),
		node("node-1", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-1"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.0.11"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00:168::11"}),
		node("node-2", corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.12"}),
		node("bare", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "bare"}),
	}
}
