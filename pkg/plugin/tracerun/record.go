package tracerun

import (
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
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
		Source:   sourceOf(res.Source),
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
		if res.Entry != nil {
			// From outside: the Service's NodePort, externalIP or
			// LoadBalancer IP, on that address.
			r.Destination.IP = dst.IP.String()
		}
	case resolve.KindIP:
		r.Destination = traceflow.Destination{IP: dst.IP.String()}
		dstName = dst.IP.String()
	case resolve.KindNode:
		r.Destination = traceflow.Destination{IP: dst.IP.String()}
		dstName = "node-" + dst.Name
	}
	srcName := res.Source.Name
	switch res.Source.Kind {
	case resolve.KindNode:
		srcName = "node-" + srcName
	case resolve.KindIP:
		srcName = res.Source.IP.String()
	}
	r.Name = traceflow.Name(srcName, dstName, suffix)
	tf := traceflow.Build(r)
	if res.Source.AsNode() && !p.Live {
		annotate(tf, labels.SourceNodeAnnotation, res.Source.Node)
	}
	if dst.Kind == resolve.KindNode {
		annotate(tf, labels.DestinationNodeAnnotation, dst.Name)
	}
	if res.Entry != nil {
		annotate(tf, labels.ViaAnnotation, res.Entry.Via)
		annotate(tf, labels.EntryAnnotation, res.Entry.How)
	}
	return tf
}

// sourceOf is the Traceflow's source: the pod, or nothing for a node (a
// Traceflow's source is always a pod; the annotation names the node).
func sourceOf(e resolve.Endpoint) traceflow.Source {
	switch e.Kind {
	case resolve.KindNode:
		return traceflow.Source{}
	case resolve.KindIP:
		return traceflow.Source{IP: e.IP.String()}
	}
	return traceflow.Source{Namespace: e.Namespace, Pod: e.Name}
}

func annotate(tf *traceflow.Traceflow, key, value string) {
	if tf.Annotations == nil {
		tf.Annotations = map[string]string{}
	}
	tf.Annotations[key] = value
}

// senderArgs are the sender helper's flags: where to inject, and the
// packet. The Traceflow's fields are range-checked where the user's flags
// are parsed, so they convert to the helper's unsigned values unchanged.
func senderArgs(res *resolve.Result, tf *traceflow.Traceflow) report.ProbeArgs {
	p := report.ProbeArgs{Destination: res.Destination.IP.String()}
	switch {
	case res.Source.Kind == resolve.KindIP:
		p.SourceOutside, p.SourceIP = true, res.Source.IP.String()
	case res.Source.AsNode():
		p.SourceNode = true
	default:
		p.SourcePod = res.Source.Namespace + "/" + res.Source.Name
		p.SourceIP = res.Source.IP.String()
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

// EndpointName is how the view names an endpoint: NS/NAME, NS/svc/NAME,
// node/NAME or the IP.
func EndpointName(e resolve.Endpoint) string {
	switch e.Kind {
	case resolve.KindNode:
		return "node/" + e.Name
	case resolve.KindPod:
		return e.Namespace + "/" + e.Name
	case resolve.KindService:
		return e.Namespace + "/svc/" + e.Name
	}
	return e.IP.String()
}
