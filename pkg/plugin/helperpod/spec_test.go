package helperpod

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/goldenfile"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

func params() Params {
	return Params{
		TraceName: "tf-pod-a-pod-b-x7k2p",
		Namespace: "traceflow-system",
		Node:      "lab-node-2",
		Role:      RoleReceiver,
		Image:     "ghcr.io/kubectl-traceflow/traceflow-helper:v0.1.0",
		Tag:       7,
		Timeout:   20 * time.Second,
	}
}

func TestBuildGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Params)
	}{
		{"receiver", func(*Params) {}},
		{"sender", func(p *Params) {
			p.Role = RoleSender
			p.Node = "lab-node-1"
			p.OVSRunDir = "/run/openvswitch"
			p.Bridge = "br-int"
			p.PullPolicy = corev1.PullNever
			p.Probe = report.ProbeArgs{SourcePod: "default/pod-a", Destination: "10.244.2.5", TCP: 80}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := params()
			tc.mod(&p)
			pod, err := Build(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			goldenfile.Check(t, tc.name+".yaml", got)
		})
	}
}

// TestBuildInvariants checks the properties every helper pod must have,
// whatever the inputs: the contract of CONVENTIONS.md item 5.
func TestBuildInvariants(t *testing.T) {
	for _, role := range []Role{RoleSender, RoleReceiver} {
		p := params()
		p.Role = role
		pod, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		s := pod.Spec
		if s.NodeName != p.Node || !s.HostNetwork || s.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: nodeName/hostNetwork/restartPolicy wrong: %q %v %q", role, s.NodeName, s.HostNetwork, s.RestartPolicy)
		}
		if s.ActiveDeadlineSeconds == nil || *s.ActiveDeadlineSeconds <= int64(p.Timeout/time.Second) {
			t.Errorf("%s: activeDeadlineSeconds %v must exceed the timeout", role, s.ActiveDeadlineSeconds)
		}
		if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
			t.Errorf("%s: service account token must not be mounted", role)
		}
		if len(s.Tolerations) != 1 || s.Tolerations[0].Operator != corev1.TolerationOpExists || s.Tolerations[0].Key != "" {
			t.Errorf("%s: must tolerate every taint, got %+v", role, s.Tolerations)
		}
		if pod.Labels[labels.ManagedBy] != labels.Manager || pod.Labels[labels.Trace] != p.TraceName || pod.Labels[labels.Role] != string(role) {
			t.Errorf("%s: labels %v", role, pod.Labels)
		}
		sc := s.Containers[0].SecurityContext
		if *sc.Privileged || *sc.AllowPrivilegeEscalation || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: security context not least privilege: %+v", role, sc)
		}
		wantSub := map[Role]report.Subcommand{RoleSender: report.SubcommandTrace, RoleReceiver: report.SubcommandReceive}[role]
		if a, err := report.Parse(s.Containers[0].Args); err != nil || a.Subcommand != wantSub || a.Tag != 7 {
			t.Errorf("%s: args %v read as %+v, %v", role, s.Containers[0].Args, a, err)
		}
		if len(pod.Name) > 63 {
			t.Errorf("%s: pod name %q longer than 63", role, pod.Name)
		}
	}
}

func TestBuildRejects(t *testing.T) {
	for name, mod := range map[string]func(*Params){
		"no node":    func(p *Params) { p.Node = "" },
		"no image":   func(p *Params) { p.Image = "" },
		"bad role":   func(p *Params) { p.Role = "watcher" },
		"no timeout": func(p *Params) { p.Timeout = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			p := params()
			mod(&p)
			if _, err := Build(p); err == nil {
				t.Fatal("Build accepted invalid params")
			}
		})
	}
}

func TestNameStablePerNode(t *testing.T) {
	a, b := Name("tf-x", RoleReceiver, "node-1"), Name("tf-x", RoleReceiver, "node-2")
	if a == b {
		t.Fatalf("two nodes got the same pod name %q", a)
	}
	if a != Name("tf-x", RoleReceiver, "node-1") {
		t.Fatal("name is not stable")
	}
}

// On a node with Antrea's agent, the helper is told where the agent's API
// is and gets the agent's token directory, read-only; elsewhere neither.
func TestBuildAntreaAgent(t *testing.T) {
	for _, role := range []Role{RoleSender, RoleReceiver, RoleServer} {
		p := params()
		p.Role = role
		plain, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		p.AntreaAgentPort = 10350
		pod, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(pod.Spec.Volumes) - len(plain.Spec.Volumes); n != 1 {
			t.Fatalf("%s: %d volumes more; want 1", role, n)
		}
		v := pod.Spec.Volumes[len(pod.Spec.Volumes)-1]
		m := pod.Spec.Containers[0].VolumeMounts[len(pod.Spec.Containers[0].VolumeMounts)-1]
		if v.HostPath == nil || v.HostPath.Path != AntreaAPIServerDir || m.Name != v.Name || m.MountPath != AntreaAPIServerDir || !m.ReadOnly {
			t.Errorf("%s: volume %+v mount %+v", role, v, m)
		}
		if a := HelperArgs(p); a.AntreaAgent != "127.0.0.1:10350" || a.AntreaToken != AntreaAPIServerDir+"/loopback-client-token" {
			t.Errorf("%s: the helper asks the agent %q with the token in %q", role, a.AntreaAgent, a.AntreaToken)
		}
		if a := HelperArgs(params()); a.AntreaAgent != "" || a.AntreaToken != "" {
			t.Errorf("without an agent the helper asks %q with the token in %q", a.AntreaAgent, a.AntreaToken)
		}
	}
}

// What a helper pod's args or a server's command says is what the helper
// reads: CommandArgs parse, as the helper parses them, into the invocation
// HelperArgs built, whatever the role and the options.
func TestCommandArgsAreWhatTheHelperReads(t *testing.T) {
	probe := report.ProbeArgs{SourcePod: "default/pod-a", SourceIP: "10.244.1.5", Destination: "10.244.2.5", TCP: 80, TCPFlags: ptr.To(uint(0))}
	for _, tc := range []struct {
		name string
		mod  func(*Params)
		want report.HelperArgs
	}{
		{"receiver", func(*Params) {}, report.HelperArgs{Subcommand: report.SubcommandReceive,
			OVSRunDir: "/var/run/openvswitch", Bridge: "br-int", Tag: 7, Timeout: 20 * time.Second, Brief: true}},
		{"receiver ignores a probe", func(p *Params) { p.Probe, p.Bridge = probe, "br-x" }, report.HelperArgs{Subcommand: report.SubcommandReceive,
			OVSRunDir: "/var/run/openvswitch", Bridge: "br-x", Tag: 7, Timeout: 20 * time.Second, Brief: true}},
		{"sender, started by the plugin's go, on a node with Antrea's agent", func(p *Params) {
			p.Role, p.Probe, p.Mark, p.WaitForGo, p.AntreaAgentPort = RoleSender, probe, 0xfffff, true, 10350
		}, report.HelperArgs{Subcommand: report.SubcommandTrace, OVSRunDir: "/var/run/openvswitch", Bridge: "br-int", Tag: 7, Timeout: 20 * time.Second,
			AntreaAgent: "127.0.0.1:10350", AntreaToken: AntreaAPIServerDir + "/loopback-client-token", Mark: 0xfffff, StartOnStdin: true, Brief: true, Probe: probe}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := params()
			tc.mod(&p)
			if d := cmp.Diff(tc.want, HelperArgs(p)); d != "" {
				t.Errorf("HelperArgs (-want +got):\n%s", d)
			}
			got, err := report.Parse(CommandArgs(p))
			if err != nil {
				t.Fatalf("the helper refuses %q: %v", CommandArgs(p), err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("the helper reads %q as (-want +got):\n%s", CommandArgs(p), d)
			}
		})
	}
}
