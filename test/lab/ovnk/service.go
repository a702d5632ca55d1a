package ovnk

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// HairpinSNATIP is OVN-Kubernetes' V4OVNServiceHairpinMasqueradeIP and its v6
// twin: OVN rewrites the source of a pod reaching itself through a Service to
// it. Empty makes OVN use the VIP instead.
const HairpinSNATIP = "169.254.169.5 fd69::5"

// LBName is makeLBName: Service_NAMESPACE/NAME_PROTO_SCOPE.
func LBName(namespace, name string, proto corev1.Protocol, scope string) string {
	return fmt.Sprintf("Service_%s/%s_%s_%s", namespace, name, proto, scope)
}

// ServiceLBs is OVN-Kubernetes' buildClusterLBs for a ClusterIP: one load
// balancer per protocol, VIP:PORT to the ready endpoints' IP:TARGETPORT (an
// empty target list while none is ready, which with reject=true answers with
// a reject). hairpinSNAT is the hairpin_snat_ip option ("" leaves it unset).
func ServiceLBs(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, hairpinSNAT string) []LoadBalancer {
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	vips := svc.Spec.ClusterIPs
	if len(vips) == 0 {
		vips = []string{svc.Spec.ClusterIP}
	}
	byProto := map[corev1.Protocol]map[string]string{}
	for _, sp := range svc.Spec.Ports {
		proto := sp.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
			continue
		}
		targets := strings.Join(endpoints(slices, sp.Name, proto), ",")
		for _, vip := range vips {
			ip, err := netip.ParseAddr(vip)
			if err != nil || !ip.Is4() {
				continue
			}
			if byProto[proto] == nil {
				byProto[proto] = map[string]string{}
			}
			byProto[proto][fmt.Sprintf("%s:%d", vip, sp.Port)] = targets
		}
	}
	var lbs []LoadBalancer
	for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP} {
		if byProto[proto] == nil {
			continue
		}
		p := strings.ToLower(string(proto))
		opts := map[string]string{"reject": "true", "event": "false", "skip_snat": "false", "neighbor_responder": "none"}
		if hairpinSNAT != "" {
			opts["hairpin_snat_ip"] = hairpinSNAT
		}
		lbs = append(lbs, LoadBalancer{
			Name: LBName(svc.Namespace, svc.Name, proto, "cluster"), Protocol: &p, Vips: byProto[proto], Options: opts,
			ExternalIDs: map[string]string{keyLBKind: "Service", keyLBOwner: svc.Namespace + "/" + svc.Name},
		})
	}
	return lbs
}

// endpoints are the ready IPv4 endpoints of the slices' port named portName
// (the Service port's name: "" when it has one port) as IP:PORT, sorted.
func endpoints(slices []*discoveryv1.EndpointSlice, portName string, proto corev1.Protocol) []string {
	seen := map[string]bool{}
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		var port int32 = -1
		for _, p := range s.Ports {
			pp := corev1.ProtocolTCP
			if p.Protocol != nil {
				pp = *p.Protocol
			}
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == portName && pp == proto && p.Port != nil {
				port = *p.Port
			}
		}
		if port < 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				seen[fmt.Sprintf("%s:%d", a, port)] = true
			}
		}
	}
	out := sortedKeys(seen)
	sort.Strings(out)
	return out
}
