package tracerun

import (
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// Probe is the packet's own settings, beyond what resolution decides (the
// protocol and the destination port). Live asks for the first packet of
// real traffic instead (agent mode only); the runner reads it back from
// the record.
type Probe struct {
	IPv6                   bool
	SrcPort, TCPFlags, TTL int32
	Live, DroppedOnly      bool
}

// DefaultProbe is the probe of `kubectl traceflow SRC DST` without packet
// flags.
func DefaultProbe() Probe {
	return Probe{TTL: traceflow.DefaultTTL, TCPFlags: traceflow.TCPFlagSYN}
}

// Record builds the trace's record from a resolution and the probe, for a
// trace of timeout (Options.Timeout); suffix is the random part of its
// name.
func Record(res *resolve.Result, p Probe, timeout time.Duration, suffix string) *traceflow.Traceflow {
	r := traceflow.Request{
		Source:   traceflow.Source{Namespace: res.Source.Namespace, Pod: res.Source.Name},
		Protocol: res.Protocol, IPv6: p.IPv6, DstPort: res.DstPort, SrcPort: p.SrcPort,
		TCPFlags: p.TCPFlags, TTL: p.TTL, Live: p.Live, DroppedOnly: p.DroppedOnly, Timeout: timeout,
	}
	dst := res.Destination
	dstName := dst.Name
	switch dst.Kind {
	case resolve.KindPod:
		r.Destination = traceflow.Destination{Namespace: dst.Namespace, Pod: dst.Name}
	case resolve.KindService:
		r.Destination = traceflow.Destination{Namespace: dst.Namespace, Service: dst.Name}
	case resolve.KindIP:
		r.Destination = traceflow.Destination{IP: dst.IP.String()}
		dstName = dst.IP.String()
	}
	r.Name = traceflow.Name(res.Source.Name, dstName, suffix)
	return traceflow.Build(r)
}

// senderArgs are the sender helper's flags: where to inject, and the
// packet. The Traceflow's fields are range-checked where the user's flags
// are parsed, so they convert to the helper's unsigned values unchanged.
func senderArgs(res *resolve.Result, tf *traceflow.Traceflow) report.ProbeArgs {
	p := report.ProbeArgs{
		SourcePod:   res.Source.Namespace + "/" + res.Source.Name,
		SourceIP:    res.Source.IP.String(),
		Destination: res.Destination.IP.String(),
	}
	th := tf.Spec.Packet.TransportHeader
	switch {
	case th.TCP != nil:
		p.TCP, p.SourcePort = uint(th.TCP.DstPort), uint(th.TCP.SrcPort)
		if th.TCP.Flags != nil {
			p.TCPFlags = ptr.To(uint(*th.TCP.Flags))
		}
	case th.UDP != nil:
		p.UDP, p.SourcePort = uint(th.UDP.DstPort), uint(th.UDP.SrcPort)
	default:
		p.ICMP = true
	}
	if h := tf.Spec.Packet.IPHeader; h != nil && h.TTL != 0 {
		p.TTL = ptr.To(uint(h.TTL))
	}
	if h := tf.Spec.Packet.IPv6Header; h != nil && h.HopLimit != 0 {
		p.TTL = ptr.To(uint(h.HopLimit))
	}
	return p
}

// EndpointName is how the view names an endpoint: NS/NAME, NS/svc/NAME or the IP.
func EndpointName(e resolve.Endpoint) string {
	switch e.Kind {
	case resolve.KindPod:
		return e.Namespace + "/" + e.Name
	case resolve.KindService:
		return e.Namespace + "/svc/" + e.Name
	}
	return e.IP.String()
}
