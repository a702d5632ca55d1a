package check

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/junit"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// The probe's hops and the answer's, as the helper engine reports them.
var (
	probeDelivered = &outcome.Hop{Node: "tf-node-2", TableID: 19, TableName: "Output", Flow: "reg0=0x10000/0x10000",
		Observation: report.Observation{Action: report.ActionDelivered, Pod: "demo/b"}}
	probeDropped = &outcome.Hop{Node: "tf-node-2", TableID: 17, TableName: "IngressDefaultRule", Flow: "ip,nw_dst=10.244.2.3",
		Observation: report.Observation{Action: report.ActionDropped, NetworkPolicy: "demo/deny-b"}}
	answerBack = &outcome.Hop{Node: "tf-node-1", Role: report.RoleReply, TableID: 19, TableName: "Output", Flow: "reg0=0x10000/0x10000",
		Observation: report.Observation{Action: report.ActionDelivered, Pod: "demo/a"}}
	answerDropped = &outcome.Hop{Node: "tf-node-1", Role: report.RoleReply, TableID: 44, TableName: "EgressDefaultRule", Flow: "ip,nw_src=10.244.2.3",
		Observation: report.Observation{Action: report.ActionDropped}}
)

func answered(fate outcome.ReplyFate, answer string) *outcome.ReplyEnd {
	return &outcome.ReplyEnd{Fate: fate, Answer: answer, Decided: answerBack,
		Reason: "the answer (" + answer + ") came back: delivered to demo/a on tf-node-1"}
}

var (
	lost = &outcome.ReplyEnd{Fate: outcome.Lost, Answer: "SYN-ACK", Decided: answerDropped,
		Reason: "the answer (SYN-ACK) was dropped on tf-node-1 by table EgressDefaultRule (flow ip,nw_src=10.244.2.3)"}
	unanswered = &outcome.ReplyEnd{Fate: outcome.Unanswered, Reason: "no answer to the probe was seen within 10s of its delivery"}
)

// A round-trip case passes or fails as its answer says, and its message
// names the way that decided it and that way's hop; a one-way case's is
// as it always was.
func TestRoundTripResult(t *testing.T) {
	delivered := func(r *outcome.ReplyEnd) outcome.Ended {
		return outcome.Ended{Verdict: outcome.Delivered, Destination: outcome.DestinationPod, Decided: probeDelivered, Reply: r}
	}
	dropped := outcome.Ended{Verdict: outcome.Dropped, Destination: outcome.DestinationPod, Decided: probeDropped}
	for _, tc := range []struct {
		name      string
		oneWay    bool
		expect    outcome.Expect
		ended     outcome.Ended
		code      exitcode.Code
		direction string
		message   string
	}{
		{"answered passes expect delivered", false, outcome.ExpectDelivered, delivered(answered(outcome.Answered, "SYN-ACK")), exitcode.OK, Reply,
			"delivered to demo/b on tf-node-2; reply Answered: the answer (SYN-ACK) came back: delivered to demo/a on tf-node-1"},
		{"refused fails expect delivered", false, outcome.ExpectDelivered, delivered(answered(outcome.Refused, "RST")), exitcode.Verdict, Reply,
			"reply: packet Delivered but the answer Refused, expected answered: the answer (RST) came back: delivered to demo/a on tf-node-1" +
				" (at tf-node-1, table Output(19), flow reg0=0x10000/0x10000)"},
		{"refused passes expect refused", false, outcome.ExpectRefused, delivered(answered(outcome.Refused, "RST")), exitcode.OK, Reply,
			"delivered to demo/b on tf-node-2; reply Refused: the answer (RST) came back: delivered to demo/a on tf-node-1"},
		{"answered fails expect refused", false, outcome.ExpectRefused, delivered(answered(outcome.Answered, "SYN-ACK")), exitcode.Verdict, Reply,
			"reply: answer Answered, expected refused: the answer (SYN-ACK) came back: delivered to demo/a on tf-node-1" +
				" (at tf-node-1, table Output(19), flow reg0=0x10000/0x10000)"},
		{"lost fails naming the answer's hop", false, outcome.ExpectDelivered, delivered(lost), exitcode.Verdict, Reply,
			"reply: packet Delivered but the answer Lost, expected answered: the answer (SYN-ACK) was dropped on tf-node-1 by table EgressDefaultRule (flow ip,nw_src=10.244.2.3)" +
				" (at tf-node-1, table EgressDefaultRule(44), flow ip,nw_src=10.244.2.3)"},
		{"unanswered fails without a hop", false, outcome.ExpectDelivered, delivered(unanswered), exitcode.Verdict, Reply,
			"reply: packet Delivered but the answer Unanswered, expected answered: no answer to the probe was seen within 10s of its delivery"},
		{"a dropped probe fails forward", false, outcome.ExpectDelivered, dropped, exitcode.Verdict, Forward,
			"forward: packet Dropped, expected delivered: dropped on tf-node-2 by table IngressDefaultRule, NetworkPolicy demo/deny-b (flow ip,nw_dst=10.244.2.3)"},
		{"a dropped probe is not refused", false, outcome.ExpectRefused, dropped, exitcode.Verdict, Forward,
			"forward: packet Dropped, expected refused: no answer was followed (only a round trip that reached the destination can be refused): dropped on tf-node-2 by table IngressDefaultRule, NetworkPolicy demo/deny-b (flow ip,nw_dst=10.244.2.3)"},
		{"expect dropped is the probe's, answer or not", false, outcome.ExpectDropped, delivered(answered(outcome.Answered, "SYN-ACK")), exitcode.Verdict, Forward,
			"forward: packet Delivered, expected dropped: delivered to demo/b on tf-node-2"},
		{"one way, as before", true, outcome.ExpectDelivered, dropped, exitcode.Verdict, "",
			"packet Dropped, expected delivered: dropped on tf-node-2 by table IngressDefaultRule, NetworkPolicy demo/deny-b (flow ip,nw_dst=10.244.2.3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := Trace{Name: "a reaches b", Case: Case{RoundTrip: !tc.oneWay}, Expect: tc.expect}
			r := result(context.Background(), tr, nil, Result{Ended: tc.ended})
			if r.Code != tc.code {
				t.Errorf("exit %d (%v), want %d", r.Code, r.Err, tc.code)
			}
			if d := r.Direction(tr); d != tc.direction {
				t.Errorf("direction %q, want %q", d, tc.direction)
			}
			if diff := cmp.Diff(tc.message, r.Message(tr)); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

// A round trip's JUnit failure names the way that decided it and that
// way's hop; its type is the answer's fate where the answer decided it.
func TestJUnitRoundTripFailure(t *testing.T) {
	start := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	rt := Case{RoundTrip: true}
	traces := []Trace{
		{File: "rt.yaml", Name: "a reaches b and back", Case: rt, Expect: outcome.ExpectDelivered},
		{File: "rt.yaml", Name: "a reaches locked and back", Case: rt, Expect: outcome.ExpectDelivered},
	}
	ended := []outcome.Ended{
		{Verdict: outcome.Delivered, Destination: outcome.DestinationPod, Decided: probeDelivered, Reply: lost},
		{Verdict: outcome.Dropped, Destination: outcome.DestinationPod, Decided: probeDropped},
	}
	results := make([]Result, len(traces))
	for i := range traces {
		results[i] = result(context.Background(), traces[i], nil, Result{Ended: ended[i], Started: start, Done: start.Add(time.Second)})
	}
	rep := JUnit{Name: "check", Started: start, PathText: func(*outcome.Model) string { return "" }}.Report(traces, results)
	var got []junit.Problem
	for _, c := range rep.Suites[0].Cases {
		if c.Failure == nil {
			t.Fatalf("%s: no failure", c.Name)
		}
		got = append(got, *c.Failure)
	}
	want := []junit.Problem{
		{Type: "Lost", Message: "reply: packet Delivered but the answer Lost, expected answered: the answer (SYN-ACK) was dropped on tf-node-1 by table EgressDefaultRule (flow ip,nw_src=10.244.2.3)" +
			" (at tf-node-1, table EgressDefaultRule(44), flow ip,nw_src=10.244.2.3)"},
		{Type: "Dropped", Message: "forward: packet Dropped, expected delivered: dropped on tf-node-2 by table IngressDefaultRule, NetworkPolicy demo/deny-b (flow ip,nw_dst=10.244.2.3)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
}

// A round trip holds two tags, so it takes two of the runner's slots; at
// Parallel 1 it still runs.
func TestTraceTags(t *testing.T) {
	oneWay, roundTrip := Trace{}, Trace{Case: Case{RoundTrip: true}}
	for _, tc := range []struct {
		name     string
		trace    Trace
		parallel int
		want     int
	}{
		{"one way", oneWay, 8, 1},
		{"round trip", roundTrip, 8, 2},
		{"round trip at Parallel 1", roundTrip, 1, 1},
	} {
		if got := tc.trace.tags(tc.parallel); got != tc.want {
			t.Errorf("%s: %d slots, want %d", tc.name, got, tc.want)
		}
	}
}
