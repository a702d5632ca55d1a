// Package engine decides who traces: Antrea's agents (agent mode) or the
// plugin itself with helper pods (helper mode), and says why in one line.
package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

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
	// AntreaAPIs are the other crd.antrea.io/v1beta1 resources served
	// (antreacontrollerinfos, clusternetworkpolicies, ...): Antrea's
	// manifests install them, `kubectl traceflow install` never does, so
	// any of them means Antrea is installed, whether or not its controller
	// is seen running.
	AntreaAPIs []string
	// Controller is what is known of Antrea's controller.
	Controller Health
	// Agents maps node name to what is known of the Antrea agent on it.
	Agents map[string]Health
	// AgentBlind, set by the caller for one trace, says why Antrea's
	// agents would not see that trace's end although they are healthy (a
	// Service without endpoints): auto then traces with helper pods, which
	// see the packet wherever it goes; --engine agent keeps Antrea's own
	// answer. "" where nothing is known to hide the end from them.
	AgentBlind string
}

// Health is what the cluster says about one Antrea component, and from
// which evidence.
type Health struct {
	Ready bool
	// Source is the evidence: "AntreaControllerInfo" or "AntreaAgentInfo"
	// (Antrea's own health record), "pod" (a Ready pod labelled as Antrea's,
	// used only where the record is missing), or "" (no evidence at all).
	Source string
	// Age is how old the record's last heartbeat was by the API server's
	// clock (records only).
	Age time.Duration
	// Detail says what the evidence showed, in words.
	Detail string
	// APIPort is the port of an agent's API on its node, from its record
	// (0 where unknown): helper mode asks the agent there to name the
	// policy rules it meets.
	APIPort int
}

// fromRecord reports whether h comes from one of Antrea's health records.
func (h Health) fromRecord() bool { return h.Source != "" && h.Source != sourcePod }

const sourcePod = "pod"

// Decision is the chosen engine, why, and where the trace is recorded.
type Decision struct {
	Mode   Mode
	Reason string
	// RecordAsCR: in helper mode, record the trace as a Traceflow object.
	// Only where nothing of Antrea is installed but the Traceflow CRD
	// (CheckRecordHome then checks that CRD is kubectl-traceflow's): an
	// Antrea controller, down or hidden by RBAC today, would give an object
	// without a phase a tag of its own and set it Running, and Antrea's
	// agents trace whatever is Running with a tag. Two engines must never
	// run one trace, and helper mode never creates a state Antrea acts on.
	RecordAsCR bool
}

// Decide applies the rules of DESIGN.md to facts for a trace over nodes.
func Decide(want Mode, f Facts, nodes []string) (Decision, error) {
	var missing []string
	for _, n := range dedupe(nodes) {
		if !f.Agents[n].Ready {
			missing = append(missing, n)
		}
	}
	agentOK := f.CRDServed && f.Controller.Ready && len(missing) == 0
	recordCR, noRecord := recordHome(f)
	switch want {
	case Agent:
		if !agentOK {
			return Decision{}, exitcode.Errorf(exitcode.Setup, "--engine agent needs Antrea: %s; use --engine helper (or auto) to trace with helper pods", whyNotAgent(f, missing))
		}
		return Decision{Mode: Agent, Reason: "--engine agent: " + whyAgent(f, nodes)}, nil
	case Helper:
		return Decision{Mode: Helper, Reason: "--engine helper" + noRecord, RecordAsCR: recordCR}, nil
	case Auto, "":
		if agentOK && f.AgentBlind != "" {
			return Decision{Mode: Helper, Reason: "Antrea is healthy, but " + f.AgentBlind + ": tracing with helper pods, which see where the packet ends" + noRecord, RecordAsCR: recordCR}, nil
		}
		if agentOK {
			return Decision{Mode: Agent, Reason: whyAgent(f, nodes)}, nil
		}
		return Decision{Mode: Helper, Reason: whyNotAgent(f, missing) + noRecord, RecordAsCR: recordCR}, nil
	}
	return Decision{}, exitcode.UsageErrorf("unknown engine %q: use auto, agent or helper", want)
}

// recordHome decides whether a helper-mode trace may be recorded as a
// Traceflow object, and otherwise says why not, as a suffix of the
// decision's reason ("" where no CRD is served: the reason says so already).
// A Traceflow object is created without a status (the API server drops a
// status on create), and Antrea's controller starts every trace it finds
// without a phase: it allocates a tag and sets Running, which is what
// Antrea's agents trace. So the object is created only where no Antrea
// controller can exist: crd.antrea.io serves nothing but traceflows (what
// `kubectl traceflow install` installs) and no controller is seen at all.
func recordHome(f Facts) (bool, string) {
	const stays = "; the record stays in the plugin (see -o yaml): "
	switch {
	case !f.CRDServed:
		return false, ""
	case len(f.AntreaAPIs) > 0:
		return false, stays + "Antrea is installed (crd.antrea.io serves " + f.AntreaAPIs[0] + "), and its controller would take a Traceflow object for a trace of its own"
	case f.Controller.Source != "":
		return false, stays + "an Antrea controller is known (" + f.Controller.Source + ") and would take a Traceflow object for a trace of its own"
	}
	return true, ""
}

// whyAgent says, in one line, which evidence showed Antrea healthy.
func whyAgent(f Facts, nodes []string) string {
	var records, pods []string
	var oldest time.Duration
	add := func(name string, h Health) {
		if h.fromRecord() {
			records = append(records, name)
			oldest = max(oldest, h.Age)
		} else {
			pods = append(pods, name)
		}
	}
	add("controller", f.Controller)
	for _, n := range dedupe(nodes) {
		add(n, f.Agents[n])
	}
	switch {
	case len(pods) == 0:
		return fmt.Sprintf("Antrea's controller and the agents on %s are healthy by AntreaControllerInfo and AntreaAgentInfo (heartbeats at most %s old by the API server's clock)", strings.Join(dedupe(nodes), ", "), oldest)
	case len(records) == 0:
		return "Antrea's controller and an agent on every node involved are Ready by their pods (Antrea's health records AntreaControllerInfo and AntreaAgentInfo are not readable here)"
	}
	return fmt.Sprintf("Antrea is healthy by AntreaControllerInfo/AntreaAgentInfo for %s (heartbeats at most %s old) and by Ready pods for %s, which have no record", strings.Join(records, ", "), oldest, strings.Join(pods, ", "))
}

func whyNotAgent(f Facts, missing []string) string {
	switch {
	case !f.CRDServed:
		return "the cluster does not serve crd.antrea.io/v1beta1 Traceflow"
	case !f.Controller.Ready:
		if f.Controller.Source != "" && f.Controller.Source != sourcePod {
			return "Antrea's controller is not healthy: " + f.Controller.Detail
		}
		return "no Ready Antrea controller serves Traceflow"
	}
	var why []string
	for _, n := range missing {
		if h := f.Agents[n]; h.fromRecord() {
			why = append(why, n+" ("+h.Detail+")")
		} else {
			why = append(why, n)
		}
	}
	return "no Ready Antrea agent on " + strings.Join(why, ", ")
}

func dedupe(nodes []string) []string {
	set := map[string]bool{}
	var out []string
	for _, n := range nodes {
		if n != "" && !set[n] {
			set[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Discovery is the part of a discovery client Gather uses.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// serverResources asks d with ctx: client-go's discovery takes no context,
// so a hung API server would hold Ctrl-C up; the answer is awaited in a
// goroutine that ctx abandons (its request ends with the process, or with
// --request-timeout).
func serverResources(ctx context.Context, d Discovery, gv string) (*metav1.APIResourceList, error) {
	type answer struct {
		l   *metav1.APIResourceList
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		l, err := d.ServerResourcesForGroupVersion(gv)
		ch <- answer{l, err}
	}()
	select {
	case a := <-ch:
		return a.l, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Pods lists pods across namespaces by label.
type Pods interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
}

// Sources are where Gather reads the facts from.
type Sources struct {
	Discovery Discovery
	// Infos reads Antrea's health records; nil means pods only.
	Infos dynamic.Interface
	Pods  Pods
	// ServerNow is the API server's clock (ServerClock.Now); without it
	// (false) a record's age is measured with this machine's clock, and the
	// record's detail says so.
	ServerNow func() (time.Time, bool)
	// LocalNow is this machine's clock, the fallback of ServerNow.
	LocalNow func() time.Time
}

// Gather reads the facts from the cluster for a trace over nodes. Antrea's
// own health records come first (AntreaControllerInfo, AntreaAgentInfo:
// conditions and heartbeats, which need no rights on pods); pods labelled
// as Antrea's stand in only where a record is missing or unreadable.
// Listing those pods needs cluster-wide list on pods; without it the agent
// path cannot be proven and the facts say so (helper mode), rather than
// failing the trace.
func Gather(ctx context.Context, s Sources, nodes []string) (Facts, error) {
	f := Facts{Agents: map[string]Health{}}
	list, err := serverResources(ctx, s.Discovery, "crd.antrea.io/v1beta1")
	served := map[string]bool{}
	switch {
	case err == nil:
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
	case apierrors.IsNotFound(err):
	default:
		return f, exitcode.Errorf(exitcode.Setup, "ask the API server which APIs it serves: %w", err)
	}
	f.CRDServed = served["traceflows"]
	for r := range served {
		if r != "traceflows" && !strings.Contains(r, "/") {
			f.AntreaAPIs = append(f.AntreaAPIs, r)
		}
	}
	sort.Strings(f.AntreaAPIs)
	if !f.CRDServed {
		return f, nil
	}
	if s.Infos != nil && served[ControllerInfoResource.Resource] && served[AgentInfoResource.Resource] {
		if err := f.readRecords(ctx, s); err != nil {
			return f, err
		}
	}
	needPods := f.Controller.Source == ""
	for _, n := range nodes {
		if n != "" && f.Agents[n].Source == "" {
			needPods = true
		}
	}
	if !needPods {
		return f, nil
	}
	pl, err := s.Pods.List(ctx, metav1.ListOptions{LabelSelector: antreaAppLabel})
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
		h := Health{Ready: true, Source: sourcePod, Detail: "pod " + p.Namespace + "/" + p.Name + " is Ready"}
		switch p.Labels[antreaComponentLabel] {
		case antreaControllerValue:
			if f.Controller.Source == "" {
				f.Controller = h
			}
		case antreaAgentValue:
			if f.Agents[p.Spec.NodeName].Source == "" {
				f.Agents[p.Spec.NodeName] = h
			}
		}
	}
	return f, nil
}

// readRecords judges Antrea's health records. A record that cannot be
// listed (RBAC) is as good as missing: pods decide instead.
func (f *Facts) readRecords(ctx context.Context, s Sources) error {
	ctrl, err := s.Infos.Resource(ControllerInfoResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return exitcode.Errorf(exitcode.Setup, "list antreacontrollerinfos: %w", err)
	}
	agents, err := s.Infos.Resource(AgentInfoResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return exitcode.Errorf(exitcode.Setup, "list antreaagentinfos: %w", err)
	}
	now, ok := time.Time{}, false
	if s.ServerNow != nil {
		now, ok = s.ServerNow()
	}
	if !ok {
		now = s.LocalNow()
	}
	for i := range ctrl.Items {
		r, err := decodeInfo(&ctrl.Items[i])
		if err != nil {
			return exitcode.Errorf(exitcode.Setup, "%w", err)
		}
		h := r.judge("AntreaControllerInfo", now, !ok, "ControllerHealthy")
		// Antrea runs one controller (its record is "antrea-controller");
		// where several records exist, a healthy one is enough.
		if !f.Controller.Ready {
			f.Controller = h
		}
	}
	for i := range agents.Items {
		r, err := decodeInfo(&agents.Items[i])
		if err != nil {
			return exitcode.Errorf(exitcode.Setup, "%w", err)
		}
		node := r.NodeRef.Name
		if node == "" {
			node = r.Name
		}
		// Tracing needs the agent's OVSDB and OpenFlow connections; the
		// controller connection only carries policies, so it is not asked.
		h := r.judge("AntreaAgentInfo", now, !ok, "AgentHealthy", "OVSDBConnectionUp", "OpenflowConnectionUp")
		h.APIPort = r.APIPort
		f.Agents[node] = h
	}
	return nil
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
