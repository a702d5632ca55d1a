package helpermode

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// A hop the helper did not see is marked inferred on its way to the view
// and the record, whichever way the helper says so; a verdict it decides is
// a prediction.
func TestInferredHopsReachTheViewAndTheRecord(t *testing.T) {
	selfSaid := dropped
	selfSaid.Inferred = true
	for name, last := range map[string]report.Line{
		"hop not observed":      guessLine(dropped, 10, "IngressDefaultRule", "priority=200,ip,reg1=0x4 actions=drop"),
		"observation inferred":  obsLine(selfSaid, 10, "IngressDefaultRule", "priority=200,ip,reg1=0x4 actions=drop"),
		"no hop, only inferred": {Type: report.TypeObservation, Observation: &selfSaid},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
				f.run(p)
				f.write(p, readyLine(report.RoleSender), obsLine(spoof, 2, "SpoofGuard", "x"), last)
			})
			c := cfg()
			c.Keep = true
			out, err := h.runner.Run(context.Background(), c, plan())
			if err != nil {
				t.Fatal(err)
			}
			if out.Verdict != outcome.Dropped || out.Decided == nil || !out.Decided.Inferred() {
				t.Fatalf("verdict %s decided at %+v, want Dropped at an inferred hop", out.Verdict, out.Decided)
			}
			var marks []bool
			var finished *outcome.Finished
			h.mu.Lock()
			for _, u := range h.updates {
				switch u := u.(type) {
				case outcome.Observed:
					marks = append(marks, u.Hop.Inferred())
				case outcome.Finished:
					finished = &u
				}
			}
			h.mu.Unlock()
			if len(marks) != 2 || marks[0] || !marks[1] {
				t.Errorf("inferred marks of the view's hops = %v, want [false true]", marks)
			}
			if finished == nil || !finished.Predicted() {
				t.Errorf("the view's verdict %+v is not marked as predicted", finished)
			}
			obs := h.records.objects["tf-a-b-xyz"].Status.Results[0].Observations
			if len(obs) != 2 || obs[0].Inferred || !obs[1].Inferred {
				t.Errorf("recorded observations %+v, want only the second inferred", obs)
			}
			// The kept object (kubectl get traceflow -o json) and -o json
			// (rendered from the view's model) say the same.
			m := &outcome.Model{}
			h.mu.Lock()
			for _, u := range h.updates {
				m.Apply(u)
			}
			h.mu.Unlock()
			if d := cmp.Diff(view.Record(m, nil).Status.Results[0].Observations, obs); d != "" {
				t.Errorf("-o json and the kept record differ (-json +kept):\n%s", d)
			}
		})
	}
}

// Leaving the pod network is not reaching a pod: the reason says so.
func TestGatewayIsNotDeliveryToAPod(t *testing.T) {
	gw := report.Observation{Component: report.ComponentForwarding, ComponentInfo: "Output", Action: report.ActionForwardedOutOfNetwork}
	for dst, want := range map[outcome.DestinationKind]string{
		outcome.DestinationPod:     "was not seen reaching the destination",
		outcome.DestinationOutside: "left the pod network on n1",
	} {
		h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
			f.run(p)
			f.write(p, readyLine(report.RoleSender), obsLine(gw, 7, "L3Forwarding", "priority=190,ip actions=output:gw0"))
		})
		pl := plan()
		pl.View.DestinationKind = dst
		out, err := h.runner.Run(context.Background(), cfg(), pl)
		if err != nil {
			t.Fatal(err)
		}
		if out.Verdict != outcome.ForwardedOutOfNetwork || !strings.Contains(out.Reason, want) {
			t.Errorf("%s: verdict %s reason %q, want it to say %q", dst, out.Verdict, out.Reason, want)
		}
	}
}

// A kept record (kubectl get traceflow -o yaml) says what the plugin's
// output says: on Antrea's pipeline each node's observations are Antrea's
// summary of its hops, as the default view and -o json|yaml show them,
// and tableHops holds every table hop with its flow.
func TestKeptRecordSaysWhatTheOutputSays(t *testing.T) {
	plainFwd := report.Observation{Component: report.ComponentForwarding, Action: report.ActionForwarded}
	routed := report.Observation{Component: report.ComponentRouting, ComponentInfo: "L3Forwarding", Action: report.ActionForwarded}
	rule := report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "EgressRule", Action: report.ActionForwarded}
	toTunnel := fwdTunnel
	toTunnel.ComponentInfo = "Output"
	classified := received
	classified.ComponentInfo = "Classification"
	injected := make(chan struct{})
	h := newHarness(func(f *fakeCluster, p *corev1.Pod) {
		f.run(p)
		if p.Labels[labels.Role] == string(helperpod.RoleReceiver) {
			f.write(p, readyLine(report.RoleReceiver))
			<-injected
			f.write(p, obsLine(classified, 0, "Classifier", "priority=200,in_port=tun0"),
				obsLine(routed, 7, "L3Forwarding", "priority=200,ip,nw_dst=10.244.2.5"),
				obsLine(delivered, 12, "Output", "priority=200,reg1=0x4"),
				resultLine("n2", report.RoleReceiver, 0, classified, routed, delivered))
			f.end(p)
			return
		}
		f.waitGo(p)
		f.write(p, readyLine(report.RoleSender))
		close(injected)
		f.write(p, obsLine(spoof, 2, "SpoofGuard", "priority=200,ip,in_port=3,nw_src=10.244.1.5"),
			obsLine(plainFwd, 4, "ConntrackZone", "priority=200,ip"),
			obsLine(rule, 18, "EgressRule", "priority=200,conj_id=7,ip"),
			obsLine(routed, 20, "L3Forwarding", "priority=200,ip,nw_dst=10.244.2.0/24"),
			obsLine(toTunnel, 30, "Output", "priority=200,reg1=0x2"),
			resultLine("n1", report.RoleSender, 0, spoof, plainFwd, rule, routed, toTunnel))
		f.end(p)
	})
	c := cfg()
	c.Keep = true
	out, err := h.runner.Run(context.Background(), c, plan("n2"))
	if err != nil || out.Verdict != outcome.Delivered {
		t.Fatalf("verdict %s (%s), err %v", out.Verdict, out.Reason, err)
	}
	kept := h.records.objects["tf-a-b-xyz"].Status.Results
	m := &outcome.Model{}
	h.mu.Lock()
	for _, u := range h.updates {
		m.Apply(u)
	}
	h.mu.Unlock()
	if d := cmp.Diff(view.Record(m, nil).Status.Results, kept); d != "" {
		t.Errorf("-o json and the kept record differ (-json +kept):\n%s", d)
	}
	var got []string
	for _, r := range kept {
		var obs []string
		for _, o := range r.Observations {
			obs = append(obs, string(o.Component)+" "+string(o.Action)+" "+o.ComponentInfo)
		}
		got = append(got, fmt.Sprintf("%s: %s; %d table hops", r.Node, strings.Join(obs, ", "), len(r.TableHops)))
	}
	want := []string{
		"n1: SpoofGuard Forwarded , NetworkPolicy Forwarded EgressRule, Forwarding Forwarded Output; 5 table hops",
		"n2: Forwarding Received , Forwarding Delivered Output; 3 table hops",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kept results are not Antrea's summary with every table hop (-want +got):\n%s", d)
	}
	if d := cmp.Diff(out.Results, kept); d != "" {
		t.Errorf("the outcome's results and the kept record differ (-outcome +kept):\n%s", d)
	}
}
