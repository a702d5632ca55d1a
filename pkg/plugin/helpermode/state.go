package helpermode

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// helper is what the runner knows of one helper pod.
type helper struct {
	node    string
	role    report.Role
	podRole helperpod.Role
	pod     string
	// requested: its create was asked for; created: it was made.
	requested, created bool
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
	// goSent: its go was sent (Config.ParallelStart).
	goSent bool
	result *report.NodeResult
	// unfinished is the helper's own word on a result it could not
	// complete (exit 3): its explanation's summary, or "".
	unfinished string
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

// podNews is what an update of a helper's pod, or a kubelet's event
// about it, says: read one way for a trace's own helpers and for a pool's
// servers, each of which then judges it by what it knows of the helper.
type podNews struct {
	pod string
	// deleted: the pod is gone; problem: it cannot do its work, and
	// waiting will not change that; waiting: what it waits for now, for
	// the view; started: its container runs or ran.
	deleted          bool
	problem, waiting string
	started          bool
}

// readPod reads a pod update; ok is false for an object that is no pod.
func readPod(e watch.Event, image string) (n podNews, ok bool) {
	p, ok := e.Object.(*corev1.Pod)
	if !ok {
		return n, false
	}
	n.pod = p.Name
	if e.Type == watch.Deleted {
		n.deleted = true
		return n, true
	}
	n.problem, n.waiting = podProblem(p, image)
	n.started = started(p)
	return n, true
}

// readKubelet reads an event about a pod. The kubelet's "Started" says the
// container runs at once; the pod's status can lag by a second or more.
func readKubelet(ev *corev1.Event, ovsRunDir, image string) podNews {
	n := podNews{pod: ev.InvolvedObject.Name}
	if ev.Reason == "Started" {
		n.started = true
		return n
	}
	if ovsRunDir == "" {
		ovsRunDir = helperpod.DefaultOVSRunDir
	}
	n.problem, n.waiting = eventProblem(ev.Reason, ev.Message, ovsRunDir, image)
	return n
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
