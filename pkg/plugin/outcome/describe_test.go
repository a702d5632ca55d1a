package outcome

import (
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// A packet that left the pod network says so; where the hop that let it
// leave saw its source translated (the node kernel's masquerade), the
// sentence names the address, so a verdict line shows the SNAT.
func TestDescribeLeftThePodNetwork(t *testing.T) {
	h := Hop{Node: "n1", TableName: "Output", Observation: report.Observation{Action: report.ActionForwardedOutOfNetwork}}
	if got, want := Describe(ForwardedOutOfNetwork, h, DestinationOutside), "left the pod network on n1"; got != want {
		t.Errorf("untranslated: %q, want %q", got, want)
	}
	h.Observation.TranslatedSrcIP = "10.89.0.11"
	if got, want := Describe(ForwardedOutOfNetwork, h, DestinationOutside), "left the pod network on n1, its source translated to 10.89.0.11 as it left (SNAT)"; got != want {
		t.Errorf("translated: %q, want %q", got, want)
	}
}
