package view

import (
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
)

func hops(actions ...report.Action) []TimedHop {
	var h []TimedHop
	for _, a := range actions {
		h = append(h, TimedHop{Hop: Hop{Observation: report.Observation{Action: a}}})
	}
	return h
}

func TestFromHops(t *testing.T) {
	for _, tc := range []struct {
		name string
		hops []TimedHop
		want Verdict
	}{
		{"nothing seen", nil, Incomplete},
		{"delivered", hops(report.ActionForwarded, report.ActionDelivered), Delivered},
		{"into tunnel, receiver silent", hops(report.ActionForwarded, report.ActionForwarded), Incomplete},
		{"received then delivered", hops(report.ActionForwarded, report.ActionReceived, report.ActionDelivered), Delivered},
		{"dropped", hops(report.ActionForwarded, report.ActionDropped), Dropped},
		{"rejected", hops(report.ActionRejected), Rejected},
		{"left the network, old name", hops(report.ActionForwardedOutOfOverlay), ForwardedOutOfNetwork},
		{"left the network", hops(report.ActionForwardedOutOfNetwork), ForwardedOutOfNetwork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromHops(tc.hops); got != tc.want {
				t.Errorf("FromHops = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		v    Verdict
		want Expect
		code exitcode.Code
	}{
		{Delivered, "", exitcode.OK},
		{Delivered, ExpectDelivered, exitcode.OK},
		{ForwardedOutOfNetwork, ExpectDelivered, exitcode.OK},
		{Dropped, ExpectDelivered, exitcode.Verdict},
		{Rejected, ExpectDelivered, exitcode.Verdict},
		{Dropped, ExpectDropped, exitcode.OK},
		{Rejected, ExpectDropped, exitcode.OK},
		{Delivered, ExpectDropped, exitcode.Verdict},
		{Rejected, ExpectRejected, exitcode.OK},
		{Dropped, ExpectRejected, exitcode.Verdict},
		{Dropped, ExpectAny, exitcode.OK},
		{Incomplete, ExpectAny, exitcode.Timeout},
		{Failed, ExpectAny, exitcode.Setup},
	} {
		code, err := ExitCode(tc.v, tc.want)
		if code != tc.code || (code == exitcode.OK) != (err == nil) {
			t.Errorf("ExitCode(%s, %q) = %d, %v; want %d", tc.v, tc.want, code, err, tc.code)
		}
	}
}
