package resolve

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// resolveService fills res.Destination, and the protocol and port, for a
// Service destination. A Service without a chosen protocol takes its first
// port; a chosen port must be one the Service exposes.
func resolveService(ctx context.Context, l Lookup, q Query, res *Result) error {
	ns := namespaceOf(q.Destination, q)
	name := q.Destination.Name
	what := fmt.Sprintf("Service %s/%s", ns, name)
	svc, err := l.Service(ctx, ns, name)
	if err != nil {
		return apiError(err, "destination "+what,
			fmt.Sprintf("check the name with 'kubectl get services -n %s', or write NAMESPACE/svc/NAME", ns))
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return exitcode.UsageErrorf("%s is an ExternalName Service (a DNS alias for %s), with no cluster IP to trace: trace to the external address as an IP instead", what, svc.Spec.ExternalName)
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return exitcode.UsageErrorf("%s is headless (clusterIP: None), so it has no virtual IP to trace: trace to one of its pods (kubectl get endpointslices -n %s -l kubernetes.io/service-name=%s)", what, ns, name)
	}
	ip, ok := pickIP(append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...), q.IPv6)
	if !ok {
		have := strings.Join(nonEmpty(append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...)), ", ")
		return exitcode.UsageErrorf("%s has no %s cluster IP (it has %s): %s", what, family(q.IPv6), have, familyFix(q.IPv6))
	}
	res.Destination = Endpoint{Kind: KindService, Namespace: ns, Name: name, IP: ip}

	port, err := pickPort(svc, what, q)
	if err != nil {
		return err
	}
	res.Protocol, res.DstPort = port.proto, port.port

	if warning := endpointsWarning(ctx, l, ns, name, what, q.IPv6); warning != "" {
		res.Warnings = append(res.Warnings, warning)
	}
	return nil
}

type servicePort struct {
	proto traceflow.Protocol
	port  int32
}

func pickPort(svc *corev1.Service, what string, q Query) (servicePort, error) {
	if q.Protocol == traceflow.ICMP {
		return servicePort{}, exitcode.UsageErrorf("%s load-balances ports, not ICMP: drop --icmp to use its first port, or trace to one of its pods", what)
	}
	if len(svc.Spec.Ports) == 0 {
		return servicePort{}, exitcode.UsageErrorf("%s exposes no ports: trace to one of its pods instead", what)
	}
	if q.Protocol == "" {
		first := svc.Spec.Ports[0]
		switch first.Protocol {
		case corev1.ProtocolTCP, "":
			return servicePort{traceflow.TCP, first.Port}, nil
		case corev1.ProtocolUDP:
			return servicePort{traceflow.UDP, first.Port}, nil
		}
		return servicePort{}, exitcode.UsageErrorf("%s's first port is %s %d, and only TCP and UDP can be traced: choose a port with --tcp PORT or --udp PORT (it exposes %s)",
			what, first.Protocol, first.Port, describePorts(svc))
	}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if string(proto) == string(q.Protocol) && p.Port == q.DstPort {
			return servicePort{q.Protocol, p.Port}, nil
		}
	}
	return servicePort{}, exitcode.UsageErrorf("%s does not expose %s port %d (it exposes %s): use one of those ports, e.g. %s",
		what, q.Protocol, q.DstPort, describePorts(svc), exampleFlag(svc))
}

func describePorts(svc *corev1.Service) string {
	var out []string
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		s := fmt.Sprintf("%s %d", proto, p.Port)
		if p.Name != "" {
			s += " (" + p.Name + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func exampleFlag(svc *corev1.Service) string {
	for _, p := range svc.Spec.Ports {
		switch p.Protocol {
		case corev1.ProtocolTCP, "":
			return fmt.Sprintf("--tcp %d", p.Port)
		case corev1.ProtocolUDP:
			return fmt.Sprintf("--udp %d", p.Port)
		}
	}
	return "another destination"
}

// endpointsWarning says when a Service has no ready endpoint of the family:
// the trace can still run (and will show the drop), so it is a warning. An
// error listing EndpointSlices (RBAC) only skips the check.
func endpointsWarning(ctx context.Context, l Lookup, ns, name, what string, ipv6 bool) string {
	slices, err := l.EndpointSlices(ctx, ns, name)
	if err != nil {
		return ""
	}
	for _, s := range slices {
		if (s.AddressType == discoveryv1.AddressTypeIPv6) != ipv6 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				return ""
			}
		}
	}
	return fmt.Sprintf("%s has no ready %s endpoints, so the packet will likely be dropped or rejected: check its selector and pods (kubectl get endpointslices -n %s -l kubernetes.io/service-name=%s)",
		what, family(ipv6), ns, name)
}
