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
)

// Labels and annotations every helper pod carries. ManagedByLabel lets
// `kubectl traceflow cleanup` sweep what a killed plugin left.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "kubectl-traceflow"
	TraceLabel     = "traceflow.kubectl-traceflow.io/trace"
	RoleLabel      = "traceflow.kubectl-traceflow.io/role"
	TagAnnotation  = "traceflow.kubectl-traceflow.io/dataplane-tag"
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
	// Args are the helper's arguments after the subcommand and the OVS flags
	// that this package sets (--ovs-rundir, --bridge, --tag, --timeout).
	Args []string
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
	sub := "trace"
	if p.Role == RoleReceiver {
		sub = "receive"
	}
	bridge := p.Bridge
	if bridge == "" {
		bridge = DefaultBridge
	}
	args := []string{sub,
		"--ovs-rundir", ovsMountPath,
		"--bridge", bridge,
		"--tag", strconv.Itoa(int(p.Tag)),
		"--timeout", p.Timeout.String(),
	}
	if p.AntreaAgentPort > 0 {
		args = append(args, "--antrea-agent", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.AntreaAgentPort)),
			"--antrea-token", AntreaAPIServerDir+"/loopback-client-token")
	}
	if p.Mark != 0 {
		args = append(args, "--mark", strconv.FormatUint(uint64(p.Mark), 10))
	}
	if p.WaitForGo {
		args = append(args, "--start-on-stdin")
	}
	return append(args, p.Args...)
}

// Build returns the pod that runs the helper on p.Node. For a server,
// p.Timeout is how long it may serve; the pod's deadline is derived from it.
func Build(p Params) (*corev1.Pod, error) {
	if p.TraceName == "" || p.Node == "" || p.Image == "" || p.Namespace == "" {
		return nil, fmt.Errorf("helper pod needs a trace name, a node, an image and a namespace")
	}
	if p.Role != RoleSender && p.Role != RoleReceiver && p.Role != RoleServer {
		return nil, fmt.Errorf("unknown helper role %q", p.Role)
	}
	if p.Timeout <= 0 {
		return nil, fmt.Errorf("helper pod needs a positive timeout")
	}
	ovnDir := p.OVNRunDir
	if ovnDir == "" {
		ovnDir = OVNRunDir
	}
	runDir := p.OVSRunDir
	if runDir == "" {
		runDir = DefaultOVSRunDir
	}
	if err := ValidateRunDir(runDir); err != nil {
		return nil, err
	}
	if err := ValidateImage(p.Image); err != nil {
		return nil, err
	}
	pull := p.PullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	args := []string{"serve"}
	if p.Role != RoleServer {
		args = CommandArgs(p)
	}
	deadline := int64((p.Timeout + deadlineSlack) / time.Second)
	hostPathType := corev1.HostPathDirectory
	// A server holds no tag of its own: each trace it runs holds one.
	annotations := map[string]string{TagAnnotation: strconv.Itoa(int(p.Tag))}
	stdin := p.WaitForGo
	if p.Role == RoleServer {
		annotations, stdin = nil, true
	}

	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(p.TraceName, p.Role, p.Node),
			Namespace: p.Namespace,
			Labels: map[string]string{
				ManagedByLabel: ManagedByValue,
				TraceLabel:     p.TraceName,
				RoleLabel:      string(p.Role),
			},
			Annotations: annotations,
		},
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
			Containers: []corev1.Container{{
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
				SecurityContext: &corev1.SecurityContext{
					// Root, because OVS creates its sockets with mode 0750 as
					// root, or (Fedora, RHEL) as user openvswitch; the helper
					// speaks OpenFlow, OVSDB and the vswitchd control
					// protocol over those sockets and opens no raw socket, so
					// every capability is dropped but DAC_OVERRIDE, which
					// lets root open a socket another user owns.
					RunAsUser:                ptr.To(int64(0)),
					RunAsNonRoot:             ptr.To(false),
					Privileged:               ptr.To(false),
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities: &corev1.Capabilities{
						Drop: []corev1.Capability{"ALL"},
						Add:  []corev1.Capability{"DAC_OVERRIDE"},
					},
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
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
			}},
			Volumes: []corev1.Volume{{
				Name: "ovs-run",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: runDir,
					// Directory (not DirectoryOrCreate): a node without OVS
					// must fail to start the pod rather than get an empty
					// directory created on it.
					Type: &hostPathType,
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
			}},
		},
	}
	if p.AntreaAgentPort > 0 {
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
	return pod, nil
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
