package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzAntreaInfos feeds Antrea's health records, as the API server lists
// them (decoded as the dynamic client decodes a list), through what
// readRecords does with each: decodeInfo, then judge with the conditions
// tracing needs, at the API server's time now (Unix seconds). The seeds in
// testdata/fuzz/FuzzAntreaInfos are records of a real Antrea v2.3.2
// (testdata/fuzz/README.md). A record judged Ready has a heartbeat no
// older than StaleAfter; every judgement says which record it read.
func FuzzAntreaInfos(f *testing.F) {
	f.Fuzz(func(t *testing.T, list []byte, now int64, local bool) {
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode(list, nil, nil)
		if err != nil {
			return
		}
		l, ok := obj.(*unstructured.UnstructuredList)
		if !ok {
			return
		}
		serverNow := time.Unix(now, 0)
		for i := range l.Items {
			u := &l.Items[i]
			r, err := decodeInfo(u)
			if err != nil {
				continue
			}
			kind, need := "AntreaAgentInfo", []string{"AgentHealthy", "OVSDBConnectionUp", "OpenflowConnectionUp"}
			if u.GetKind() == "AntreaControllerInfo" {
				kind, need = "AntreaControllerInfo", []string{"ControllerHealthy"}
			}
			h := r.judge(kind, serverNow, local, need...)
			if h.Source != kind || h.Detail == "" {
				t.Fatalf("record %s judged %+v: no source or detail", u.GetName(), h)
			}
			if h.Ready && (h.Age > StaleAfter || h.Age < 0) {
				t.Fatalf("record %s Ready with a heartbeat %s old", u.GetName(), h.Age)
			}
			if again := r.judge(kind, serverNow, local, need...); again != h {
				t.Fatalf("judged twice: %+v, then %+v", h, again)
			}
		}
	})
}
