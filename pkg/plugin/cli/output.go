package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/resolve"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
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
	fmt.Fprintf(&b, "  packet   %s\n", traceflow.DescribePacket(tf.Spec))
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
		s := fmt.Sprintf("pod %s/%s", view.Safe(e.Namespace), view.Safe(e.Name))
		if e.IP.IsValid() {
			s += "  " + e.IP.String()
		}
		if e.Node != "" {
			s += "  on node " + view.Safe(e.Node)
		}
		switch {
		case e.HostNetwork && !e.IP.IsValid():
			s += "  (host network: as its node, from the address the node's kernel picks)"
		case e.HostNetwork:
			s += "  (host network)"
		}
		return s
	case resolve.KindService:
		return fmt.Sprintf("Service %s/%s  %s", view.Safe(e.Namespace), view.Safe(e.Name), e.IP)
	case resolve.KindNode:
		if !e.IP.IsValid() {
			return "node " + view.Safe(e.Name) + "  (from the address its kernel picks)"
		}
		return fmt.Sprintf("node %s  %s", view.Safe(e.Name), e.IP)
	}
	return "IP " + e.IP.String()
}
