package view

import (
	"strings"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// The scenarios every renderer is tested on, as update sequences with a fixed
// clock: each is what the engine produces for one case of issue 6.
var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func at(ms float64) outcome.At {
	return outcome.At{Time: t0.Add(time.Duration(ms * float64(time.Millisecond)))}
}

func started(dst, packet string) outcome.TraceStarted {
	kind := outcome.DestinationPod
	switch {
	case strings.Contains(dst, "/svc/"):
		kind = outcome.DestinationService
	case !strings.Contains(dst, "/"):
		kind = outcome.DestinationOutside
	}
	return outcome.TraceStarted{At: at(0), Name: "tf-pod-a-x7k2p", Engine: "helper",
		EngineReason: "no Antrea controller serves Traceflow", Source: "default/pod-a",
		Destination: dst, DestinationKind: kind, Packet: packet, Tag: 7}
}

// guessed marks an observation as inferred from OVS's trace, not seen.
func guessed(o report.Observation) report.Observation {
	o.Inferred = true
	return o
}

func hop(node string, role report.Role, table int, name string, o report.Observation, flow string) outcome.Hop {
	return outcome.Hop{Node: node, Role: role, Observation: o, TableID: table, TableName: name, Flow: flow, Cookie: 0x7f00000000000007}
}

const n1, n2 = "lab-node-1", "lab-node-2"

var scenarios = map[string][]outcome.Update{
	"intra-node-delivered": {
		started("default/pod-c", "TCP 80 SYN"),
		outcome.HelperWaiting{At: at(40), Node: n1, Role: report.RoleSender, Reason: "ContainerCreating"},
		outcome.HelperReady{At: at(900), Node: n1, Role: report.RoleSender, Version: "v0.1.0"},
		outcome.Injected{At: at(901), Node: n1},
		outcome.Observed{At: at(901.2), Hop: hop(n1, report.RoleSender, 2, "SpoofGuard",
			report.Observation{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded}, "priority=200,ip,in_port=pod-a-1b2c,nw_src=10.244.1.5 actions=goto_table:3")},
		outcome.Observed{At: at(901.3), Hop: hop(n1, report.RoleSender, 7, "L3Forwarding",
			report.Observation{Component: report.ComponentRouting, ComponentInfo: "L3Forwarding", Action: report.ActionForwarded}, "priority=200,ip,nw_dst=10.244.1.7 actions=set_field:...,goto_table:9")},
		outcome.Observed{At: at(901.4), Hop: hop(n1, report.RoleSender, 12, "Output",
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionDelivered, Pod: "default/pod-c"}, "priority=200,reg1=0x5 actions=output:NXM_NX_REG1[]")},
		outcome.Finished{At: at(902), Verdict: outcome.Delivered},
	},
	"inter-node-delivered": {
		started("default/pod-b", "TCP 80 SYN"),
		outcome.HelperWaiting{At: at(30), Node: n2, Role: report.RoleReceiver, Reason: "pulling image"},
		outcome.HelperWaiting{At: at(35), Node: n1, Role: report.RoleSender, Reason: "scheduled"},
		outcome.HelperReady{At: at(850), Node: n2, Role: report.RoleReceiver, Version: "v0.0.9"},
		outcome.Warning{At: at(850), Node: n2, Message: "helper v0.0.9 differs from plugin v0.1.0"},
		outcome.HelperReady{At: at(870), Node: n1, Role: report.RoleSender, Version: "v0.1.0"},
		outcome.Injected{At: at(871), Node: n1},
		outcome.Observed{At: at(871.2), Hop: hop(n1, report.RoleSender, 2, "SpoofGuard",
			report.Observation{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded}, "priority=200,ip,in_port=3 actions=goto_table:3")},
		outcome.Observed{At: at(871.4), Hop: hop(n1, report.RoleSender, 7, "L3Forwarding",
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionForwarded, TunnelDstIP: "192.168.77.12"}, "priority=200,ip,nw_dst=10.244.2.0/24 actions=set_field:192.168.77.12->tun_dst,output:tun0")},
		outcome.Observed{At: at(872.1), Hop: hop(n2, report.RoleReceiver, 0, "Classifier",
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Classification", Action: report.ActionReceived}, "priority=200,in_port=tun0 actions=goto_table:7")},
		outcome.Observed{At: at(872.3), Hop: hop(n2, report.RoleReceiver, 12, "Output",
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionDelivered, Pod: "default/pod-b"}, "priority=200,reg1=0x4 actions=output:NXM_NX_REG1[]")},
		outcome.Finished{At: at(873), Verdict: outcome.Delivered},
	},
	"service-lb": {
		started("default/svc/web", "TCP 80 SYN"),
		outcome.HelperReady{At: at(800), Node: n1, Role: report.RoleSender, Version: "v0.1.0"},
		outcome.Injected{At: at(801), Node: n1},
		outcome.Observed{At: at(801.3), Hop: hop(n1, report.RoleSender, 5, "EndpointDNAT",
			report.Observation{Component: report.ComponentLB, Action: report.ActionForwarded, TranslatedDstIP: "10.244.2.9"}, "priority=200,tcp,nw_dst=10.96.0.10,tp_dst=80 actions=group:3")},
		outcome.Observed{At: at(801.6), Hop: hop(n1, report.RoleSender, 12, "Output",
			report.Observation{Component: report.ComponentForwarding, Action: report.ActionDelivered, Pod: "default/web-1"}, "priority=200,reg1=0x6 actions=output:NXM_NX_REG1[]")},
		outcome.Finished{At: at(802), Verdict: outcome.Delivered},
	},
	"networkpolicy-drop": {
		started("default/pod-b", "TCP 80 SYN"),
		outcome.HelperReady{At: at(700), Node: n1, Role: report.RoleSender, Version: "v0.1.0"},
		outcome.Injected{At: at(701), Node: n1},
		outcome.Observed{At: at(701.3), Hop: hop(n1, report.RoleSender, 10, "IngressDefaultRule",
			report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "IngressDefaultRule", Action: report.ActionDropped,
				NetworkPolicy: "K8sNetworkPolicy:default/deny-web", NetworkPolicyRule: "ingress default deny"}, "priority=200,ip,reg1=0x4 actions=drop")},
		outcome.Finished{At: at(702), Verdict: outcome.Dropped},
	},
	"timeout": {
		started("default/pod-b", "UDP 53"),
		outcome.HelperReady{At: at(700), Node: n2, Role: report.RoleReceiver, Version: "v0.1.0"},
		outcome.HelperReady{At: at(720), Node: n1, Role: report.RoleSender, Version: "v0.1.0"},
		outcome.Injected{At: at(721), Node: n1},
		outcome.Observed{At: at(721.4), Hop: hop(n1, report.RoleSender, 7, "L3Forwarding",
			report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded, TunnelDstIP: "192.168.77.12"}, "priority=200,ip,nw_dst=10.244.2.0/24 actions=output:tun0")},
		outcome.Finished{At: at(20721), Verdict: outcome.Incomplete, Reason: "no report from lab-node-2 within 20s"},
	},
	// The sender saw the probe into the policy table; only OVS's trace
	// says it is dropped there (the drop flow's copy never reported).
	"inferred-drop": {
		started("default/pod-b", "TCP 80 SYN"),
		outcome.HelperReady{At: at(700), Node: n1, Role: report.RoleSender, Version: "v0.1.0"},
		outcome.Injected{At: at(701), Node: n1},
		outcome.Observed{At: at(701.2), Hop: hop(n1, report.RoleSender, 2, "SpoofGuard",
			report.Observation{Component: report.ComponentSpoofGuard, Action: report.ActionForwarded}, "priority=200,ip,in_port=3 actions=goto_table:3")},
		outcome.Observed{At: at(701.4), Hop: hop(n1, report.RoleSender, 10, "IngressDefaultRule",
			guessed(report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "IngressDefaultRule", Action: report.ActionDropped}), "priority=200,ip,reg1=0x4 actions=drop")},
		outcome.Finished{At: at(702), Verdict: outcome.Dropped, Reason: "dropped on lab-node-1 by table IngressDefaultRule (flow priority=200,ip,reg1=0x4 actions=drop)"},
	},
	// Inter-node, delivered as seen, with hops in between that only OVS's
	// trace accounts for (a select group's bucket the catchers missed).
	"inferred-hops-delivered": {
		started("default/svc/web", "TCP 80 SYN"),
		outcome.HelperReady{At: at(850), Node: n2, Role: report.RoleReceiver, Version: "v0.1.0"},
		outcome.HelperReady{At: at(870), Node: n1, Role: report.RoleSender, Version: "v0.1.0"},
		outcome.Injected{At: at(871), Node: n1},
		outcome.Observed{At: at(871.2), Hop: hop(n1, report.RoleSender, 5, "EndpointDNAT",
			report.Observation{Component: report.ComponentLB, Action: report.ActionForwarded, TranslatedDstIP: "10.244.2.9"}, "priority=200,tcp,nw_dst=10.96.0.10,tp_dst=80 actions=group:3")},
		outcome.Observed{At: at(871.3), Hop: hop(n1, report.RoleSender, 6, "EndpointDNATBucket",
			guessed(report.Observation{Component: report.ComponentLB, Action: report.ActionForwarded}), "priority=190,reg4=0x30000/0x70000 actions=ct(commit,table=7,zone=65520,nat(dst=10.244.2.9:80))")},
		outcome.Observed{At: at(871.4), Hop: hop(n1, report.RoleSender, 7, "L3Forwarding",
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionForwarded, TunnelDstIP: "192.168.77.12"}, "priority=200,ip,nw_dst=10.244.2.0/24 actions=set_field:192.168.77.12->tun_dst,output:tun0")},
		outcome.Observed{At: at(872.1), Hop: hop(n2, report.RoleReceiver, 0, "Classifier",
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Classification", Action: report.ActionReceived}, "priority=200,in_port=tun0 actions=goto_table:7")},
		outcome.Observed{At: at(872.3), Hop: hop(n2, report.RoleReceiver, 12, "Output",
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionDelivered, Pod: "default/web-1"}, "priority=200,reg1=0x4 actions=output:NXM_NX_REG1[]")},
		outcome.Finished{At: at(873), Verdict: outcome.Delivered, Reason: "delivered to default/web-1 on lab-node-2"},
	},
	// A pod destination the packet reaches only through the gateway: it
	// left the pod network, which is not delivery to the pod (exit 2).
	"gateway-pod-destination": {
		started("default/pod-b", "TCP 80 SYN"),
		outcome.HelperReady{At: at(700), Node: n1, Role: report.RoleSender, Version: "v0.1.0"},
		outcome.Injected{At: at(701), Node: n1},
		outcome.Observed{At: at(701.3), Hop: hop(n1, report.RoleSender, 7, "L3Forwarding",
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionForwardedOutOfNetwork}, "priority=190,ip actions=output:antrea-gw0")},
		outcome.Finished{At: at(702), Verdict: outcome.ForwardedOutOfNetwork, Reason: "left the pod network on lab-node-1 by table L3Forwarding (through the gateway or the uplink) and was not seen reaching the destination"},
	},
	// An address outside the cluster's pods: leaving the pod network is
	// the end the user wanted (exit 0).
	"outside-destination": {
		started("8.8.8.8", "UDP 53"),
		outcome.HelperReady{At: at(700), Node: n1, Role: report.RoleSender, Version: "v0.1.0"},
		outcome.Injected{At: at(701), Node: n1},
		outcome.Observed{At: at(701.3), Hop: hop(n1, report.RoleSender, 7, "L3Forwarding",
			report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionForwardedOutOfNetwork}, "priority=190,ip actions=output:antrea-gw0")},
		outcome.Finished{At: at(702), Verdict: outcome.ForwardedOutOfNetwork, Reason: "left the pod network on lab-node-1"},
	},
	"helper-failed": {
		started("default/pod-b", "ICMP echo"),
		outcome.HelperWaiting{At: at(30), Node: n2, Role: report.RoleReceiver, Reason: "pulling image"},
		outcome.HelperWaiting{At: at(5030), Node: n2, Role: report.RoleReceiver, Reason: "ErrImagePull"},
		outcome.Finished{At: at(5031), Verdict: outcome.Failed, Reason: "helper on lab-node-2 cannot pull image ghcr.io/kubectl-traceflow/traceflow-helper:v0.1.0: check --helper-image and the node's registry access"},
	},
}

// build replays a scenario into a model, calling each after every update.
// A Finished that names no deciding hop gets the one the engines would
// name: the last hop that ends the path.
func build(updates []outcome.Update, each func(*outcome.Model, outcome.Update)) *outcome.Model {
	m := &outcome.Model{}
	for _, u := range updates {
		if f, ok := u.(outcome.Finished); ok && f.Decided == nil && f.Verdict.Completed() {
			_, f.Decided = outcome.Decide(m.AllHops())
			u = f
		}
		m.Apply(u)
		if each != nil {
			each(m, u)
		}
	}
	return m
}
