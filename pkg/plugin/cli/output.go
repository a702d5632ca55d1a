package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

func printJSON(w io.Writer, tf *traceflow.Traceflow) error {
	b, err := json.MarshalIndent(tf, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding Traceflow %s as JSON: %w", tf.Name, err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func printYAML(w io.Writer, tf *traceflow.Traceflow) error {
	b, err := yaml.Marshal(tf)
	if err != nil {
		return fmt.Errorf("encoding Traceflow %s as YAML: %w", tf.Name, err)
	}
	_, err = w.Write(b)
	return err
}

// printPlain is the dry-run summary for people: what would be traced.
func printPlain(w io.Writer, tf *traceflow.Traceflow, res *resolve.Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Traceflow %s (dry run: nothing was created)\n", tf.Name)
	fmt.Fprintf(&b, "  from     %s\n", describe(res.Source))
	fmt.Fprintf(&b, "  to       %s\n", describe(res.Destination))
	fmt.Fprintf(&b, "  packet   %s\n", describePacket(tf.Spec))
	mode := "injected probe"
	if tf.Spec.LiveTraffic {
		mode = "live traffic"
		if tf.Spec.DroppedOnly {
			mode += ", dropped packets only"
		}
	}
	fmt.Fprintf(&b, "  mode     %s\n", mode)
	fmt.Fprintf(&b, "  timeout  %ds\n", tf.Spec.Timeout)
	_, err := io.WriteString(w, b.String())
	return err
}

func describe(e resolve.Endpoint) string {
	switch e.Kind {
	case resolve.KindPod:
		s := fmt.Sprintf("pod %s/%s  %s", safe(e.Namespace), safe(e.Name), e.IP)
		if e.Node != "" {
			s += "  on node " + safe(e.Node)
		}
		if e.HostNetwork {
			s += "  (host network)"
		}
		return s
	case resolve.KindService:
		return fmt.Sprintf("Service %s/%s  %s", safe(e.Namespace), safe(e.Name), e.IP)
	}
	return "IP " + e.IP.String()
}

func describePacket(s traceflow.Spec) string {
	p := s.Packet
	var parts []string
	th := p.TransportHeader
	switch {
	case th.TCP != nil:
		parts = append(parts, fmt.Sprintf("TCP port %d", th.TCP.DstPort))
		if th.TCP.SrcPort != 0 {
			parts = append(parts, fmt.Sprintf("from port %d", th.TCP.SrcPort))
		}
		if th.TCP.Flags != nil {
			parts = append(parts, "flags "+traceflow.FormatTCPFlags(*th.TCP.Flags))
		}
	case th.UDP != nil:
		parts = append(parts, fmt.Sprintf("UDP port %d", th.UDP.DstPort))
		if th.UDP.SrcPort != 0 {
			parts = append(parts, fmt.Sprintf("from port %d", th.UDP.SrcPort))
		}
	default:
		parts = append(parts, "ICMP echo request")
	}
	if p.IPv6Header != nil {
		parts = append(parts, fmt.Sprintf("IPv6 hop limit %d", p.IPv6Header.HopLimit))
	} else if p.IPHeader != nil {
		parts = append(parts, fmt.Sprintf("IPv4 TTL %d", p.IPHeader.TTL))
	}
	return strings.Join(parts, ", ")
}

// safe escapes a string from the cluster before it reaches a terminal, so
// that a crafted node or object name cannot send control sequences.
func safe(s string) string {
	q := strconv.QuoteToGraphic(s)
	if q[1:len(q)-1] == s {
		return s
	}
	return q
}
