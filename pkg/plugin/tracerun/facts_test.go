package tracerun

import (
	"context"
	"errors"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/engine"
)

func TestFactsCacheReadsEachNodeSetOnce(t *testing.T) {
	reads := map[string]int{}
	fail := true
	read := func(_ context.Context, nodes []string) (engine.Facts, error) {
		key := ""
		for _, n := range nodes {
			key += n + ","
		}
		reads[key]++
		if key == "n2," && fail {
			fail = false
			return engine.Facts{}, errors.New("the API server is restarting")
		}
		return engine.Facts{CRDServed: key == "n1,n2,"}, nil
	}
	c := NewFactsCache()
	for _, nodes := range [][]string{{"n1", "n2"}, {"n1", "n2"}, {"n2"}, {"n2"}, {"n2"}, {"n1", "n2"}} {
		f, err := c.gather(context.Background(), nodes, read)
		if len(nodes) == 1 && err != nil {
			continue // the failed read, asked again by the next trace
		}
		if err != nil || f.CRDServed != (len(nodes) == 2) {
			t.Fatalf("facts for %v: %+v, %v", nodes, f, err)
		}
	}
	if reads["n1,n2,"] != 1 || reads["n2,"] != 2 {
		t.Errorf("reads %v: want the pair read once, n2 twice (its first read failed and is not kept)", reads)
	}
	var none *FactsCache
	if _, err := none.gather(context.Background(), []string{"n1"}, read); err != nil || reads["n1,"] != 1 {
		t.Errorf("without a cache every trace reads: %v %v", reads, err)
	}
}

func TestRecordWhere(t *testing.T) {
	cr := engine.Decision{Mode: engine.Helper, Reason: "no Antrea", RecordAsCR: true}
	for _, tc := range []struct {
		name string
		d    engine.Decision
		o    Options
		cr   bool
	}{
		{"a single trace records as the CRD allows", cr, Options{}, true},
		{"a matrix keeps its records in memory", cr, Options{RecordInMemory: true}, false},
		{"unless it is asked to keep them", cr, Options{RecordInMemory: true, Keep: true}, true},
		{"where no object is made anyway", engine.Decision{Mode: engine.Helper}, Options{RecordInMemory: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recordWhere(tc.d, tc.o)
			if got.RecordAsCR != tc.cr {
				t.Errorf("RecordAsCR %v, want %v (%s)", got.RecordAsCR, tc.cr, got.Reason)
			}
			if tc.d.RecordAsCR && !got.RecordAsCR && got.Reason == tc.d.Reason {
				t.Errorf("the reason does not say where the record went: %q", got.Reason)
			}
		})
	}
}
