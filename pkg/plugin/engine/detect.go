// Package engine decides who traces: Antrea's agents (agent mode) or the
// plugin itself with helper pods (helper mode), and says why in one line.
package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

// Mode is an engine choice (--engine).
type Mode string

// Modes.
const (
	Auto   Mode = "auto"
	Agent  Mode = "agent"
	Helper Mode = "helper"
)

// Labels Antrea's manifests put on its pods.
const (
	antreaAppLabel        = "app=antrea"
	antreaComponentLabel  = "component"
	antreaControllerValue = "antrea-controller"
	antreaAgentValue      = "antrea-agent"
)

// Facts are what the cluster says about Antrea, gathered once.
type Facts struct {
	// CRDServed: the API serves crd.antrea.io/v1beta1 traceflows.
	CRDServed bool
	// ControllerReady: an antrea-controller pod is Running and Ready.
	ControllerReady bool
	// AgentReady maps node name to whether an antrea-agent pod on it is Ready.
	AgentReady map[string]bool
}

// Decision is the chosen engine, why, and where the trace is recorded.
type Decision struct {
	Mode   Mode
	Reason string
	// RecordAsCR: in helper mode, record the trace as a Traceflow object.
	// Only where the CRD is served and no Antrea controller would pick the
	// object up and act on it too: two engines must never run one trace.
	RecordAsCR bool
}

// Decide applies the rules of DESIGN.md to facts for a trace over nodes.
func Decide(want Mode, f Facts, nodes []string) (Decision, error) {
	var missing []string
	for _, n := range nodes {
		if !f.AgentReady[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	agentOK := f.CRDServed && f.ControllerReady && len(missing) == 0
	switch want {
	case Agent:
		if !agentOK {
			return Decision{}, exitcode.Errorf(exitcode.Setup, "--engine agent needs Antrea: %s; use --engine helper (or auto) to trace with helper pods", whyNotAgent(f, missing))
		}
		return Decision{Mode: Agent, Reason: "--engine agent: Antrea's controller and agents trace"}, nil
	case Helper:
		return Decision{Mode: Helper, Reason: "--engine helper", RecordAsCR: f.CRDServed && !f.ControllerReady}, nil
	case Auto, "":
		if agentOK {
			return Decision{Mode: Agent, Reason: "Antrea's controller and an agent on every node involved are Ready"}, nil
		}
		return Decision{Mode: Helper, Reason: whyNotAgent(f, missing), RecordAsCR: f.CRDServed && !f.ControllerReady}, nil
	}
	return Decision{}, exitcode.UsageErrorf("unknown engine %q: use auto, agent or helper", want)
}

func whyNotAgent(f Facts, missing []string) string {
	switch {
	case !f.CRDServed:
		return "the cluster does not serve crd.antrea.io/v1beta1 Traceflow"
	case !f.ControllerReady:
		return "no Ready Antrea controller serves Traceflow"
	default:
		return "no Ready Antrea agent on " + strings.Join(missing, ", ")
	}
}

// Discovery is the part of a discovery client Gather uses.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// Pods lists pods across namespaces by label.
type Pods interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
}

// Gather reads the facts from the cluster. Listing Antrea's pods needs
// cluster-wide list on pods; without it the agent path cannot be proven
// and the facts say so (helper mode), rather than failing the trace.
func Gather(ctx context.Context, d Discovery, pods Pods) (Facts, error) {
	f := Facts{AgentReady: map[string]bool{}}
	list, err := d.ServerResourcesForGroupVersion("crd.antrea.io/v1beta1")
	switch {
	case err == nil:
		for _, r := range list.APIResources {
			if r.Name == "traceflows" {
				f.CRDServed = true
			}
		}
	case apierrors.IsNotFound(err):
	default:
		return f, exitcode.Errorf(exitcode.Setup, "ask the API server which APIs it serves: %w", err)
	}
	if !f.CRDServed {
		return f, nil
	}
	pl, err := pods.List(ctx, metav1.ListOptions{LabelSelector: antreaAppLabel})
	if apierrors.IsForbidden(err) {
		return f, nil
	}
	if err != nil {
		return f, exitcode.Errorf(exitcode.Setup, "list Antrea's pods (label %s): %w", antreaAppLabel, err)
	}
	for i := range pl.Items {
		p := &pl.Items[i]
		if !podReady(p) {
			continue
		}
		switch p.Labels[antreaComponentLabel] {
		case antreaControllerValue:
			f.ControllerReady = true
		case antreaAgentValue:
			f.AgentReady[p.Spec.NodeName] = true
		}
	}
	return f, nil
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// String renders the decision as the one line the user sees.
func (d Decision) String() string {
	return fmt.Sprintf("engine: %s (%s)", d.Mode, d.Reason)
}
