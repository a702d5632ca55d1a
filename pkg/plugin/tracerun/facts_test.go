package tracerun

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

// A run reads the helper namespace once: its absence is an answer and is
// kept; a read that failed otherwise is asked again by the next trace.
func TestFactsCacheReadsTheNamespaceOnce(t *testing.T) {
	reads := map[string]int{}
	get := func(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
		reads[name]++
		switch {
		case name == "gone":
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
		case name == "flaky" && reads[name] == 1:
			return nil, errors.New("connection refused")
		}
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
	}
	cached := NewFactsCache().namespaceGetter(get)
	for range 3 {
		for _, name := range []string{"traceflow-system", "gone", "flaky"} {
			ns, err := cached(context.Background(), name, metav1.GetOptions{})
			if name == "gone" && !apierrors.IsNotFound(err) {
				t.Fatalf("%s: %v, want NotFound", name, err)
			}
			if name == "traceflow-system" && (err != nil || ns.Name != name) {
				t.Fatalf("%s: %v %v", name, ns, err)
			}
		}
	}
	if reads["traceflow-system"] != 1 || reads["gone"] != 1 || reads["flaky"] != 2 {
		t.Errorf("reads %v: want one each, flaky two (its failed read not kept)", reads)
	}
	var none *FactsCache
	if _, err := none.namespaceGetter(get)(context.Background(), "traceflow-system", metav1.GetOptions{}); err != nil || reads["traceflow-system"] != 2 {
		t.Errorf("without a cache every trace reads: %v %v", reads, err)
	}
}

// A run lists other engines' tags once per antreaTagsMaxAge; a failed
// list is not kept, and a caller cannot change the kept list.
func TestFactsCacheListsTagsOncePerAge(t *testing.T) {
	lists := 0
	fail := false
	list := func(context.Context) (map[uint8]bool, error) {
		lists++
		if fail {
			return nil, errors.New("timeout")
		}
		return map[uint8]bool{7: true}, nil
	}
	now := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	inUse := NewFactsCache().inUse(list, func() time.Time { return now })
	for range 3 {
		got, err := inUse(context.Background())
		if err != nil || !got[7] || len(got) != 1 {
			t.Fatalf("in use: %v %v", got, err)
		}
		got[9] = true
	}
	if lists != 1 {
		t.Fatalf("%d lists within %s, want 1", lists, antreaTagsMaxAge)
	}
	now = now.Add(antreaTagsMaxAge)
	fail = true
	if _, err := inUse(context.Background()); err == nil || lists != 2 {
		t.Fatalf("after %s: %d lists, error %v; want a second list, failed", antreaTagsMaxAge, lists, err)
	}
	fail = false
	if got, err := inUse(context.Background()); err != nil || lists != 3 || len(got) != 1 {
		t.Fatalf("after a failed list: %v %v, %d lists; want a third", got, err, lists)
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
