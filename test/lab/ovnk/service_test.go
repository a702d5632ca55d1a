package ovnk

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestServiceLBs(t *testing.T) {
	svc := func(ip string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	slice := func(port string, proto corev1.Protocol, target int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To(port), Protocol: ptr.To(proto), Port: ptr.To(target)}}}
	}
	ep := func(ip string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	opts := map[string]string{"reject": "true", "event": "false", "skip_snat": "false", "neighbor_responder": "none",
		"hairpin_snat_ip": "169.254.169.5 fd69::5"}
	ids := map[string]string{"k8s.ovn.org/kind": "Service", "k8s.ovn.org/owner": "demo/web"}
	for _, tc := range []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   []LoadBalancer
	}{
		{"headless: none", svc("None", corev1.ServicePort{Port: 80}), nil, nil},
		{"one TCP port, ready endpoints sorted, an unready one left out",
			svc("10.96.0.10", corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}),
			[]*discoveryv1.EndpointSlice{slice("", corev1.ProtocolTCP, 8080,
				ep("10.244.2.3", nil), ep("10.244.1.3", ptr.To(true)), ep("10.244.1.9", ptr.To(false)))},
			[]LoadBalancer{{Name: "Service_demo/web_TCP_cluster", Protocol: ptr.To("tcp"),
				Vips: map[string]string{"10.96.0.10:80": "10.244.1.3:8080,10.244.2.3:8080"}, Options: opts, ExternalIDs: ids}}},
		{"TCP and UDP: one load balancer each; ports matched by name",
			svc("10.96.0.10", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
				corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}),
			[]*discoveryv1.EndpointSlice{slice("http", corev1.ProtocolTCP, 8080, ep("10.244.1.3", nil)),
				slice("dns", corev1.ProtocolUDP, 5353, ep("10.244.1.4", nil))},
			[]LoadBalancer{
				{Name: "Service_demo/web_TCP_cluster", Protocol: ptr.To("tcp"),
					Vips: map[string]string{"10.96.0.10:80": "10.244.1.3:8080"}, Options: opts, ExternalIDs: ids},
				{Name: "Service_demo/web_UDP_cluster", Protocol: ptr.To("udp"),
					Vips: map[string]string{"10.96.0.10:53": "10.244.1.4:5353"}, Options: opts, ExternalIDs: ids},
			}},
		{"no endpoints: the VIP stays, with no backends (reject=true answers)",
			svc("10.96.0.10", corev1.ServicePort{Port: 80}), nil,
			[]LoadBalancer{{Name: "Service_demo/web_TCP_cluster", Protocol: ptr.To("tcp"),
				Vips: map[string]string{"10.96.0.10:80": ""}, Options: opts, ExternalIDs: ids}}},
		{"SCTP is not translated", svc("10.96.0.10", corev1.ServicePort{Port: 80, Protocol: corev1.ProtocolSCTP}), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, ServiceLBs(tc.svc, tc.slices, HairpinSNATIP)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestServiceLBsWithoutHairpinSNATIP(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "d", Name: "s"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Port: 1}}}}
	if o := ServiceLBs(svc, nil, "")[0].Options; o["hairpin_snat_ip"] != "" {
		t.Errorf("hairpin_snat_ip = %q, want unset (OVN then SNATs hairpin traffic to the VIP)", o["hairpin_snat_ip"])
	}
}
