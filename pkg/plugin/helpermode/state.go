package helpermode

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// helper is what the runner knows of one helper pod.
type helper struct {
	node    string
	role    report.Role
	pod     string
	created bool
	// streaming: its log is being followed; ready: it said so; ended: its
	// report is complete (result, error or end of log).
	streaming, ready, ended bool
	// settled: it has said its flows are gone (cleanup), or ended in a
	// way that leaves none (an error line, the end of its log, its pod
	// gone); cleanup is what its cleanup line said.
	settled bool
	cleanup *report.Cleanup
	cookie  string
	waiting string
	// goR and goW are its standard input, through an attach (Config.
	// ParallelStart); goSent: its go was written.
	goR    *io.PipeReader
	goW    *io.PipeWriter
	goSent bool
	result *report.NodeResult
	// noise keeps the last lines that were not report lines (a crash's
	// stack trace, a shell error) to quote when the helper fails.
	noise []string
}

func (h *helper) addNoise(s string) {
	if s = strings.TrimSpace(s); s != "" {
		h.noise = keepNoise(h.noise, s)
	}
}

// keepNoise appends s to noise, keeping the last three: enough to quote a
// failing helper without holding its whole output.
func keepNoise(noise []string, s string) []string {
	noise = append(noise, s)
	if len(noise) > 3 {
		noise = noise[len(noise)-3:]
	}
	return noise
}

// sortedHelpers lists the helpers by pod name, for messages in a stable
// order.
func (t *tracer) sortedHelpers() []*helper {
	names := slices.Sorted(maps.Keys(t.helpers))
	out := make([]*helper, 0, len(names))
	for _, n := range names {
		out = append(out, t.helpers[n])
	}
	return out
}

// podRole maps a helper pod's role label to the report's role.
func podRole(r helperpod.Role) report.Role {
	if r == helperpod.RoleSender {
		return report.RoleSender
	}
	return report.RoleReceiver
}

// hopFrom turns a report line into the outcome's hop on node. A hop the
// helper did not see (the observation says it was inferred, or its OVS hop
// was not observed) is marked inferred on the observation itself, so that
// the view and the record carry the mark as they are.
func hopFrom(node string, role report.Role, l report.Line) outcome.Hop {
	h := outcome.Hop{Node: node, Role: role, Observation: *l.Observation}
	if l.Hop != nil && !l.Hop.Observed {
		h.Observation.Inferred = true
	}
	if l.Hop != nil {
		h.TableID = int(l.Hop.Table)
		h.TableName = l.Hop.TableName
		h.Flow = l.Hop.Flow
		h.NoPipeline = l.Hop.NoMatch && l.Hop.PipelineFlows != nil && *l.Hop.PipelineFlows == 0
		h.PolicyUnknown = l.Hop.PolicyUnknown
		// A cookie that does not parse stays 0 and is not shown.
		if c, err := strconv.ParseUint(strings.TrimPrefix(l.Hop.Cookie, "0x"), 16, 64); err == nil {
			h.Cookie = c
		}
	}
	return h
}

// BuildImageHint says how to make a helper image the nodes can pull: until
// a release publishes one, the default image may not exist in any registry.
const BuildImageHint = "to build and push one yourself: docker build -f images/helper/Dockerfile -t REGISTRY/traceflow-helper:TAG . && docker push REGISTRY/traceflow-helper:TAG " +
	"(from a checkout of kubectl-traceflow; without Docker, make image HELPER_IMAGE=REGISTRY/traceflow-helper:TAG writes an OCI archive to push with your tools), " +
	"then run with --helper-image REGISTRY/traceflow-helper:TAG (or REGISTRY/traceflow-helper@sha256:DIGEST)"

// Container waiting reasons that will not resolve by waiting.
var fatalWaiting = map[string]string{
	"ErrImagePull":               "cannot pull the helper image %s: check --helper-image and that the node can reach its registry",
	"ImagePullBackOff":           "cannot pull the helper image %s: check --helper-image and that the node can reach its registry",
	"ErrImageNeverPull":          "the helper image %s is not on the node and the pull policy forbids pulling it",
	"InvalidImageName":           "the helper image name %s is invalid: check --helper-image",
	"CreateContainerConfigError": "the helper container for image %s cannot be configured",
	"CreateContainerError":       "the helper container for image %s cannot be created",
	"RunContainerError":          "the helper container for image %s cannot start",
}

// podProblem returns why a helper pod cannot do its work, or "" while it
// still may. waiting is its current waiting reason, for the view.
func podProblem(p *corev1.Pod, image string) (problem, waiting string) {
	if p.Status.Phase == corev1.PodFailed {
		msg := p.Status.Message
		if msg == "" {
			msg = p.Status.Reason
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && t.Message != "" {
				msg = strings.TrimSpace(t.Message)
				// The helper's last report line, an error: its message.
				if l, err := report.ParseLine([]byte(msg)); err == nil && l.Type == report.TypeError && l.Error != nil {
					msg = l.Error.Message
				}
			}
		}
		return "helper pod failed: " + msg, ""
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			if f, ok := fatalWaiting[w.Reason]; ok {
				msg := fmt.Sprintf(f, image) + " (" + w.Reason + ": " + w.Message + ")"
				if w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" {
					msg += "; " + BuildImageHint
				}
				return msg, w.Reason
			}
			return "", w.Reason
		}
	}
	// A pending pod without container statuses says nothing new: "scheduled"
	// is shown when the pod is created, and a late watch event must not
	// move the view back to it.
	return "", ""
}

// started reports whether the helper container runs or ran, so its log
// can be followed.
func started(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// eventProblem interprets an event about a helper pod: a message to show
// while waiting, or a problem that ends the trace.
func eventProblem(reason, message, ovsRunDir, image string) (problem, waiting string) {
	switch reason {
	case "Pulling":
		return "", "pulling image"
	case "Pulled":
		return "", "starting"
	case "FailedMount":
		if strings.Contains(message, "hostPath type check failed") || strings.Contains(message, "is not a directory") {
			return fmt.Sprintf("the node has no Open vSwitch run directory %s: check that OVS runs on this node, or pass --ovs-rundir with its run directory", ovsRunDir), ""
		}
		return "", "mounting " + ovsRunDir
	case "Failed":
		// The kubelet's event for a failed pull comes before the pod's
		// status says ErrImagePull: it gets the same message and hint.
		if strings.HasPrefix(message, "Failed to pull image") || message == "Error: ErrImagePull" || message == "Error: ImagePullBackOff" {
			return fmt.Sprintf(fatalWaiting["ErrImagePull"], image) + " (" + message + "); " + BuildImageHint, ""
		}
		return "helper container failed: " + message, ""
	}
	return "", ""
}
