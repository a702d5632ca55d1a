package helpermode

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/outcome"
)

// While the trace runs, the record's observations only grow: a rule hop
// that a drop later takes back out of Antrea's summary (a drop rule is
// reported at the drop) is never written before the node's path has
// ended, so that someone watching the object never sees a hop withdrawn.
// The final write is Antrea's summary, and every table hop is kept.
func TestRecordWhileRunningWithdrawsNothing(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	hop := func(table int, name string, o report.Observation, flow string) outcome.Hop {
		return outcome.Hop{Node: "n2", Role: report.RoleReceiver, Observation: o, TableID: table, TableName: name, Flow: flow}
	}
	hops := []outcome.Hop{
		hop(0, "Classifier", received, "priority=200,in_port=tun0"),
		hop(7, "L3Forwarding", report.Observation{Component: report.ComponentRouting, Action: report.ActionForwarded}, "priority=200,ip"),
		hop(24, "IngressRule", report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "IngressRule", Action: report.ActionForwarded},
			"priority=200,conj_id=9,ip"),
		hop(26, "IngressMetric", report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "IngressMetric", Action: report.ActionDropped},
			"priority=200,reg3=0x9 actions=drop"),
	}
	rec := newRecorder(nil, nil, false, false)
	var writes [][]report.Observation
	for i, h := range hops {
		rec.add(h, t0.Add(time.Duration(i)*time.Millisecond))
		writes = append(writes, rec.results(false)[0].Observations)
	}
	final := rec.results(true)
	if len(final) != 1 || len(final[0].TableHops) != len(hops) {
		t.Fatalf("final results %+v, want one node with %d table hops", final, len(hops))
	}
	var got []string
	for _, o := range final[0].Observations {
		got = append(got, string(o.Component)+" "+string(o.Action)+" "+o.ComponentInfo)
	}
	if d := cmp.Diff([]string{"Forwarding Received ", "NetworkPolicy Dropped IngressMetric"}, got); d != "" {
		t.Errorf("final observations are not Antrea's summary (-want +got):\n%s", d)
	}
	for i, w := range writes {
		if len(w) > len(final[0].Observations) || !slices.Equal(w, final[0].Observations[:len(w)]) {
			t.Errorf("write after hop %d (%s) has %+v, not a beginning of the final %+v", i, hops[i].TableName, w, final[0].Observations)
		}
	}
}
