package outcome

import (
	"strings"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

func hops(actions ...report.Action) []TimedHop {
	var h []TimedHop
	for i, a := range actions {
		h = append(h, TimedHop{Hop: Hop{TableID: i, Observation: report.Observation{Action: a}}})
	}
	return h
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hops    []TimedHop
		want    Verdict
		decided int // table id of the deciding hop; -1 for none
	}{
		{"nothing seen", nil, Incomplete, -1},
		{"delivered", hops(report.ActionForwarded, report.ActionDelivered), Delivered, 1},
		{"into tunnel, receiver silent", hops(report.ActionForwarded, report.ActionForwarded), Incomplete, -1},
		{"received then delivered", hops(report.ActionForwarded, report.ActionReceived, report.ActionDelivered), Delivered, 2},
		{"dropped", hops(report.ActionForwarded, report.ActionDropped), Dropped, 1},
		{"rejected", hops(report.ActionRejected), Rejected, 0},
		{"left the network, old name", hops(report.ActionForwardedOutOfOverlay), ForwardedOutOfNetwork, 0},
		{"left the network", hops(report.ActionForwardedOutOfNetwork), ForwardedOutOfNetwork, 0},
		{"forwarded after an end", hops(report.ActionDropped, report.ActionForwarded), Dropped, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, at := Decide(tc.hops)
			if got != tc.want {
				t.Errorf("Decide = %s, want %s", got, tc.want)
			}
			switch {
			case tc.decided < 0 && at != nil:
				t.Errorf("decided at table %d, want nowhere", at.TableID)
			case tc.decided >= 0 && (at == nil || at.TableID != tc.decided):
				t.Errorf("decided at %v, want table %d", at, tc.decided)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		v    Verdict
		want Expect
		dst  DestinationKind
		code exitcode.Code
	}{
		{Delivered, "", DestinationPod, exitcode.OK},
		{Delivered, ExpectDelivered, DestinationService, exitcode.OK},
		{ForwardedOutOfNetwork, ExpectDelivered, DestinationOutside, exitcode.OK},
		{ForwardedOutOfNetwork, "", DestinationOutside, exitcode.OK},
		// Leaving the pod network does not reach a pod: the gateway of a
		// routed cluster is not the destination.
		{ForwardedOutOfNetwork, ExpectDelivered, DestinationPod, exitcode.Verdict},
		{ForwardedOutOfNetwork, ExpectDelivered, DestinationService, exitcode.Verdict},
		{ForwardedOutOfNetwork, "", DestinationPodIP, exitcode.Verdict},
		{ForwardedOutOfNetwork, ExpectAny, DestinationPod, exitcode.OK},
		{ForwardedOutOfNetwork, ExpectDropped, DestinationOutside, exitcode.Verdict},
		{Dropped, ExpectDelivered, DestinationPod, exitcode.Verdict},
		{Rejected, ExpectDelivered, DestinationPod, exitcode.Verdict},
		{Dropped, ExpectDropped, DestinationPod, exitcode.OK},
		{Rejected, ExpectDropped, DestinationPod, exitcode.OK},
		{Delivered, ExpectDropped, DestinationPod, exitcode.Verdict},
		{Rejected, ExpectRejected, DestinationPod, exitcode.OK},
		{Dropped, ExpectRejected, DestinationPod, exitcode.Verdict},
		{Dropped, ExpectAny, DestinationPod, exitcode.OK},
		{Incomplete, ExpectAny, DestinationPod, exitcode.Timeout},
		{Failed, ExpectAny, DestinationPod, exitcode.Setup},
	} {
		code, err := ExitCode(tc.v, tc.want, tc.dst)
		if code != tc.code || (code == exitcode.OK) != (err == nil) {
			t.Errorf("ExitCode(%s, %q, %s) = %d, %v; want %d", tc.v, tc.want, tc.dst, code, err, tc.code)
		}
	}
}

func TestExitCodeSaysThePacketLeftThePodNetwork(t *testing.T) {
	_, err := ExitCode(ForwardedOutOfNetwork, ExpectDelivered, DestinationPod)
	if err == nil || !strings.Contains(err.Error(), "left the pod network") || !strings.Contains(err.Error(), "not seen reaching the destination") {
		t.Errorf("error = %v, want it to say the packet left the pod network and was not seen reaching the destination", err)
	}
}

func TestModelCountsInferredAndPrediction(t *testing.T) {
	m := &Model{}
	seen := Hop{Node: "n1", Role: report.RoleSender, Observation: report.Observation{Action: report.ActionForwarded}}
	guessed := Hop{Node: "n1", Role: report.RoleSender, Observation: report.Observation{Action: report.ActionDropped, Inferred: true}}
	m.Apply(Observed{Hop: seen})
	m.Apply(Observed{Hop: guessed})
	v, at := Decide(m.AllHops())
	m.Apply(Finished{Verdict: v, Decided: at})
	if hops, inferred := m.Counts(); hops != 2 || inferred != 1 {
		t.Errorf("Counts = %d, %d; want 2, 1", hops, inferred)
	}
	if !m.Finished.Predicted() {
		t.Error("a verdict decided by an inferred hop is not marked as predicted")
	}
	if code, _ := m.ExitCode(ExpectDropped); code != exitcode.OK {
		t.Errorf("ExitCode(dropped) = %d, want 0", code)
	}
}

func TestVerdictPhase(t *testing.T) {
	for v, completed := range map[Verdict]bool{Delivered: true, ForwardedOutOfNetwork: true, Dropped: true, Rejected: true, Incomplete: false, Failed: false} {
		if v.Completed() != completed {
			t.Errorf("%s.Completed() = %v", v, !completed)
		}
	}
}
