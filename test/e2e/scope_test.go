//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// The lab is shared: other people's traces run while these tests do, so a
// check for leftovers looks only at this run's traces (their names, as
// record, helper-pod label and tag-claim holder, and their tags, in the
// flows' cookies), never at everything in the cluster.
var ours = struct {
	sync.Mutex
	names map[string]bool
	tags  map[uint8]bool
}{names: map[string]bool{}, tags: map[uint8]bool{}}

// remember records a finished trace of this run.
func remember(r traceRun) {
	if r.record == nil || r.record.Name == "" {
		return
	}
	ours.Lock()
	defer ours.Unlock()
	ours.names[r.record.Name] = true
	if tag := uint8(r.record.Status.DataplaneTag); tag != 0 { //nolint:gosec // a DSCP tag
		ours.tags[tag] = true
	}
}

func ourName(name string) bool {
	ours.Lock()
	defer ours.Unlock()
	return ours.names[name]
}

// ourObjects lists `kubectl get KIND -A -l managed-by` and returns the ones
// of this run's traces: by the trace label, the lease holder, or the name.
func ourObjects(t testing.TB, kind string) []string {
	t.Helper()
	out, err := kubectl(context.Background(), "get", kind, "-A", "-l="+labels.Selector, "-o", "json")
	if err != nil {
		// A cluster without the Traceflow CRD holds no trace records.
		if kind == "traceflows" && strings.Contains(err.Error(), "the server could not find the requested resource") {
			return nil
		}
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name, Namespace string
				Labels          map[string]string
			}
			Spec struct {
				HolderIdentity string `json:"holderIdentity"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl get %s: %v", kind, err)
	}
	var mine []string
	for _, it := range list.Items {
		m := it.Metadata
		if ourName(m.Labels[labels.Trace]) || ourName(it.Spec.HolderIdentity) || ourName(m.Name) {
			mine = append(mine, kind+"/"+m.Namespace+"/"+m.Name)
		}
	}
	return mine
}

// ourFlows keeps the flow lines whose cookie carries one of this run's tags
// (bits 47-40 of a trace cookie).
func ourFlows(lines string) string {
	ours.Lock()
	defer ours.Unlock()
	var keep []string
	for _, l := range strings.Split(lines, "\n") {
		_, rest, ok := strings.Cut(l, "cookie=0x")
		if !ok {
			continue
		}
		c, err := strconv.ParseUint(strings.TrimRight(strings.Fields(rest)[0], ","), 16, 64)
		if err == nil && ours.tags[uint8(c>>40)] { //nolint:gosec // the tag byte of the cookie
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
