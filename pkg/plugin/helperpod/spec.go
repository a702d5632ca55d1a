// Package helperpod builds the spec of the short-lived pods that run
// traceflow-helper on a node. Building is pure: everything that varies (names,
// image, timeout) comes in through Params, so the spec can be compared in tests.
package helperpod

import (
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Defaults for the places the helper looks at on the node.
const (
	DefaultOVSRunDir = "/var/run/openvswitch"
	DefaultBridge    = "br-int"
	ContainerName    = "helper"
	// ovsMountPath is where the node's OVS run directory appears in the pod.
	// The helper is told this path, so it does not depend on the host layout.
	ovsMountPath = "/var/run/openvswitch"
	// OVNRunDir is where OVN keeps its sockets on a node: OVN-Kubernetes'
	// interconnect mode runs the node's own southbound and northbound
	// databases there (ovnsb_db.sock, ovnnb_db.sock), and
	// Open_vSwitch external_ids:ovn-remote names the southbound one. The
	// helper reads them to name hops by OVN's logical flows; it is mounted
	// read-only at the same path, so that ovn-remote means the same inside.
	OVNRunDir = "/var/run/ovn"
	// AntreaAPIServerDir is where Antrea's agent keeps the token of its
	// own API (loopback-client-token), a hostPath in Antrea's manifest.
	AntreaAPIServerDir = "/var/run/antrea/apiserver"
)

// Role says what a helper does on its node.
type Role string

// Helper roles: the sender injects the probe, a receiver waits for it. A
// server (`traceflow-helper serve`) runs every trace of a `check` run on
// its node, sender or receiver, as the plugin hands them to it through its
// standard input.
const (
	RoleSender   Role = "sender"
	RoleReceiver Role = "receiver"
	RoleServer   Role = "server"
)

// Params are the inputs of a helper pod spec.
type Params struct {
	// TraceName names the trace; pods are named after it and labelled with it.
	TraceName string
	Namespace string
	Node      string
	Role      Role
	Image     string
	// PullPolicy defaults to IfNotPresent.
	PullPolicy corev1.PullPolicy
	// OVSRunDir is the node's OVS run directory (hostPath).
	OVSRunDir string
	// OVNRunDir is the node's OVN run directory (hostPath), "" for
	// OVNRunDir; it appears at OVNRunDir in the pod.
	OVNRunDir string
	Bridge    string
	Tag       uint8
	// Mark is the trace's own probe mark (--mark), shared by its sender
	// and receivers; 0 leaves the helper's default (derived from the tag).
	Mark uint32
	// ReplyTag, where set, follows the answer back too (--reply-tag).
	ReplyTag uint8
	// Timeout is the trace's timeout; the pod's deadline is derived from it.
	Timeout time.Duration
	// WaitForGo starts a helper that waits for a line on its standard
	// input before it installs flows (the plugin attaches, and writes it at
	// once to a receiver, and to a sender once every receiver is ready);
	// its report then reaches the plugin through the same attach.
	WaitForGo bool
	// AntreaAgentPort is the port of the Antrea agent's API on p.Node (its
	// AntreaAgentInfo's apiPort), 0 where no agent runs there. With it the
	// helper asks the agent, on the node's loopback address, which policy
	// rule a conjunction id stands for, with the token the agent writes
	// for its own antctl: the pod mounts AntreaAPIServerDir read-only.
	AntreaAgentPort int
	// Probe is a sender's packet and where to inject it; the other flags
	// of its command line come from the fields above.
	Probe report.ProbeArgs
}

// deadlineSlack is how long a helper pod may live beyond the trace's
// timeout: time to start, pull an image already present and report. After
// it the kubelet kills the pod even if the plugin that started it is gone.
const deadlineSlack = 60 * time.Second

// Name returns the helper pod's name for a trace, role and node. Node names
// can be long, so the name keeps the trace name and role and adds a short
// hash of the node, which is unique enough among a trace's few nodes.
func Name(trace string, role Role, node string) string {
	return fmt.Sprintf("%s-%s-%s", trace, role, shortHash(node))
}

// CommandArgs are the helper's arguments for one trace on p.Node as p.Role
// (sender or receiver): a one-shot pod's, or a command a server runs.
func CommandArgs(p Params) []string {
	return HelperArgs(p).Args()
}

// HelperArgs is the helper's invocation for one trace on p.Node as p.Role
// (sender or receiver), as the helper parses it from CommandArgs.
func HelperArgs(p Params) report.HelperArgs {
	a := report.HelperArgs{
		Subcommand: report.SubcommandTrace,
		// The pod mounts the node's OVS run directory at ovsMountPath.
		OVSRunDir:    ovsMountPath,
		Bridge:       p.Bridge,
		Tag:          uint(p.Tag),
		Timeout:      p.Timeout,
		Mark:         uint(p.Mark),
		ReplyTag:     uint(p.ReplyTag),
		StartOnStdin: p.WaitForGo,
		// The plugin reads only the explanation's summary: OVS's trace
		// text and the hop list (tens of KiB a line on OVN) would cross
		// the runtime, the kubelet and the API server for nothing.
		Brief: true,
		Probe: p.Probe,
	}
	if p.Role == RoleReceiver {
		a.Subcommand, a.Probe = report.SubcommandReceive, report.ProbeArgs{}
	}
	if a.Bridge == "" {
		a.Bridge = DefaultBridge
	}
	if p.AntreaAgentPort > 0 {
		a.AntreaAgent = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.AntreaAgentPort))
		// The pod mounts AntreaAPIServerDir at the same path.
		a.AntreaToken = AntreaAPIServerDir + "/loopback-client-token"
	}
	return a
}

// Build returns the pod that runs the helper on p.Node. For a server,
// p.Timeout is how long it may serve; the pod's deadline is derived from it.
func Build(p Params) (*corev1.Pod, error) {
	if err := validate(p); err != nil {
		return nil, err
	}
	deadline := int64((p.Timeout + deadlineSlack) / time.Second)
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: objectMeta(p),
		Spec: corev1.PodSpec{
			// nodeName binds the pod directly: no scheduler round trip, and a
			// node the scheduler considers full or cordoned is still traced.
			NodeName: p.Node,
			// hostNetwork keeps the helper out of the pod network it is
			// diagnosing: a pod attached to the bridge would add a port to the
			// very pipeline under trace, and would not start where the CNI is
			// broken. OVS is reached through unix sockets only.
			HostNetwork:                   true,
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &deadline,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(5)),
			// Tolerate every taint: the node under diagnosis is often the one
			// that is NotReady, unreachable or under pressure.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{container(p)},
			Volumes:     volumes(p),
		},
	}
	if p.AntreaAgentPort > 0 {
		mountAntreaAPIServer(pod)
	}
	return pod, nil
}

// validate rejects Params that Build cannot make a pod of, in the order a
// user fixes them: what is missing, then what is malformed.
func validate(p Params) error {
	if p.TraceName == "" || p.Node == "" || p.Image == "" || p.Namespace == "" {
		return fmt.Errorf("helper pod needs a trace name, a node, an image and a namespace")
	}
	if p.Role != RoleSender && p.Role != RoleReceiver && p.Role != RoleServer {
		return fmt.Errorf("unknown helper role %q", p.Role)
	}
	if p.Timeout <= 0 {
		return fmt.Errorf("helper pod needs a positive timeout")
	}
	if err := ValidateRunDir(ovsRunDir(p)); err != nil {
		return err
	}
	return ValidateImage(p.Image)
}

// ovsRunDir is the node's OVS run directory, DefaultOVSRunDir unless set.
func ovsRunDir(p Params) string {
	if p.OVSRunDir == "" {
		return DefaultOVSRunDir
	}
	return p.OVSRunDir
}

// objectMeta names the pod and carries the labels a sweep finds it by and
// the tag a sweep judges its claim by.
func objectMeta(p Params) metav1.ObjectMeta {
	// A server holds no tag of its own: each trace it runs holds one.
	annotations := map[string]string{labels.TagAnnotation: strconv.Itoa(int(p.Tag))}
	if p.Role == RoleServer {
		annotations = nil
	}
	return metav1.ObjectMeta{
		Name:      Name(p.TraceName, p.Role, p.Node),
		Namespace: p.Namespace,
		Labels: map[string]string{
			labels.ManagedBy: labels.Manager,
			labels.Trace:     p.TraceName,
			labels.Role:      string(p.Role),
		},
		Annotations: annotations,
	}
}

// container is the helper's container: its arguments, and the least
// privilege that still reaches OVS's sockets.
func container(p Params) corev1.Container {
	pull := p.PullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	args := []string{"serve"}
	if p.Role != RoleServer {
		args = CommandArgs(p)
	}
	stdin := p.WaitForGo || p.Role == RoleServer
	return corev1.Container{
		Name:            ContainerName,
		Image:           p.Image,
		ImagePullPolicy: pull,
		Args:            args,
		// Stdin carries the plugin's go to a helper (a sender's once
		// every receiver is ready), or a server's traces; StdinOnce
		// closes it when the plugin detaches, so a helper whose
		// plugin died never starts, and a server stops its traces
		// and exits.
		Stdin:     stdin,
		StdinOnce: stdin,
		// The helper names its node in its reports; with hostNetwork
		// its hostname is the machine's, which need not be the
		// node's name.
		Env: []corev1.EnvVar{{
			Name:      "NODE_NAME",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}},
		}},
		SecurityContext:          securityContext(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Resources:                Resources(),
		VolumeMounts: []corev1.VolumeMount{{
			Name:      "ovs-run",
			MountPath: ovsMountPath,
			// Connecting to a unix socket needs no write on the
			// directory that holds it; the helper creates nothing there.
			ReadOnly: true,
		}, {
			Name:      "ovn-run",
			MountPath: OVNRunDir,
			ReadOnly:  true,
		}},
	}
}

// securityContext runs the helper as root, because OVS creates its sockets
// with mode 0750 as root, or (Fedora, RHEL) as user openvswitch; the helper
// speaks OpenFlow, OVSDB and the vswitchd control protocol over those
// sockets and opens no raw socket, so every capability is dropped but
// DAC_OVERRIDE, which lets root open a socket another user owns, and
// NET_ADMIN, which ctnetlink asks of whoever reads the node kernel's
// connection tracking: where a probe leaves OVS into the node's own stack,
// the helper reads the connection it made there (the node's masquerade,
// out of OVS's sight) and deletes it when the trace ends.
func securityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:                ptr.To(int64(0)),
		RunAsNonRoot:             ptr.To(false),
		Privileged:               ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities: &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
			Add:  []corev1.Capability{"DAC_OVERRIDE", "NET_ADMIN"},
		},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// volumes are the node's OVS and OVN run directories, as hostPaths.
func volumes(p Params) []corev1.Volume {
	ovnDir := p.OVNRunDir
	if ovnDir == "" {
		ovnDir = OVNRunDir
	}
	return []corev1.Volume{{
		Name: "ovs-run",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: ovsRunDir(p),
			// Directory (not DirectoryOrCreate): a node without OVS
			// must fail to start the pod rather than get an empty
			// directory created on it.
			Type: ptr.To(corev1.HostPathDirectory),
		}},
	}, {
		Name: "ovn-run",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: ovnDir,
			// Unset: no check, so that a node without OVN starts
			// the helper all the same (it then finds no ovn-remote
			// and names hops by their tables).
			Type: ptr.To(corev1.HostPathUnset),
		}},
	}}
}

// mountAntreaAPIServer gives the helper the token of Antrea's agent API, so
// that it can name the policy rules of the hops it reports.
func mountAntreaAPIServer(pod *corev1.Pod) {
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "antrea-apiserver", MountPath: AntreaAPIServerDir, ReadOnly: true})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name: "antrea-apiserver",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: AntreaAPIServerDir,
			// Unset, as for OVN's: Antrea's agent record says it runs
			// on the node, so the directory is there; should it not
			// be, the trace still runs and its policy rules stay
			// unnamed (the helper says it found no token), where
			// Directory would fail the helper's pod over a name.
			Type: ptr.To(corev1.HostPathUnset),
		}},
	})
}

// Resources are the helper container's: small requests, so that a node
// that is full still admits it, a memory limit, so that a helper gone wrong
// cannot starve the node it diagnoses, and no CPU limit: CFS throttling
// would delay the helper's reading of packet-ins and make a hop look slow
// or missed. Measured in the lab while the nodes forwarded traffic
// (test/e2e TestHelperResourceUse): see the README's "Helper pods".
func Resources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("50m"),
			corev1.ResourceMemory: resource.MustParse("32Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("128Mi"),
		},
	}
}

// shortHash is a stable 6-hex-digit FNV-1a hash of s.
func shortHash(s string) string {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return fmt.Sprintf("%06x", h&0xffffff)
}
