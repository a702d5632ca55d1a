package traceflow

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

func loadCRD(t *testing.T) map[string]any {
	t.Helper()
	var crd map[string]any
	if err := yaml.Unmarshal(CRDManifest(), &crd); err != nil {
		t.Fatalf("embedded CRD manifest is not YAML: %v", err)
	}
	return crd
}

func dig(t *testing.T, m any, path ...string) any {
	t.Helper()
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			t.Fatalf("at %q: not a map", p)
		}
		m = mm[p]
	}
	return m
}

func TestCRDManifest(t *testing.T) {
	crd := loadCRD(t)
	for _, tt := range []struct {
		path []string
		want any
	}{
		{[]string{"apiVersion"}, "apiextensions.k8s.io/v1"},
		{[]string{"kind"}, "CustomResourceDefinition"},
		{[]string{"metadata", "name"}, CRDName},
		{[]string{"metadata", "labels", labels.ManagedBy}, labels.Manager},
		{[]string{"spec", "group"}, Group},
		{[]string{"spec", "scope"}, "Cluster"},
		{[]string{"spec", "names", "kind"}, Kind},
		{[]string{"spec", "names", "listKind"}, ListKind},
		{[]string{"spec", "names", "plural"}, Resource},
	} {
		if got := dig(t, crd, tt.path...); got != tt.want {
			t.Errorf("%s = %v, want %v", strings.Join(tt.path, "."), got, tt.want)
		}
	}
	versions := dig(t, crd, "spec", "versions").([]any)
	if len(versions) != 1 {
		t.Fatalf("%d versions, want 1", len(versions))
	}
	v := versions[0].(map[string]any)
	if v["name"] != Version || v["served"] != true || v["storage"] != true {
		t.Errorf("version = %v %v %v, want %s served storage", v["name"], v["served"], v["storage"], Version)
	}
	if _, ok := dig(t, v, "subresources", "status").(map[string]any); !ok {
		t.Error("no status subresource: the helper engine writes status through it")
	}
	var columns []string
	for _, c := range v["additionalPrinterColumns"].([]any) {
		columns = append(columns, c.(map[string]any)["name"].(string))
	}
	for _, want := range []string{"Phase", "Source-Pod", "Destination-Pod", "Destination-IP", "Age"} {
		if !contains(columns, want) {
			t.Errorf("printer columns %v lack %s", columns, want)
		}
	}
	timeout := dig(t, v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "timeout").(map[string]any)
	if timeout["minimum"] != float64(MinTimeoutSeconds) || timeout["maximum"] != float64(MaxTimeoutSeconds) {
		t.Errorf("timeout bounds = %v..%v, want %d..%d", timeout["minimum"], timeout["maximum"], MinTimeoutSeconds, MaxTimeoutSeconds)
	}
}

// TestCRDSchemaCoversTypes walks every JSON field of Traceflow and checks
// that the schema declares it: the API server prunes undeclared fields, so
// a field missing from the schema would be silently lost on the way through
// the cluster.
func TestCRDSchemaCoversTypes(t *testing.T) {
	crd := loadCRD(t)
	root := dig(t, crd, "spec", "versions").([]any)[0]
	schema := dig(t, root, "schema", "openAPIV3Schema").(map[string]any)
	var missing []string
	walkSchema(reflect.TypeFor[Traceflow](), schema, "", &missing)
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the CRD schema lacks fields of the Go types:\n  %s", strings.Join(missing, "\n  "))
	}
}

func walkSchema(typ reflect.Type, schema map[string]any, path string, missing *[]string) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
		if items, ok := schema["items"].(map[string]any); ok {
			schema = items
		}
	}
	if typ.Kind() != reflect.Struct || typ.PkgPath() == "k8s.io/apimachinery/pkg/apis/meta/v1" {
		return
	}
	props, _ := schema["properties"].(map[string]any)
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || name == "metadata" {
			continue // inline TypeMeta, or ObjectMeta which the server knows
		}
		sub, ok := props[name].(map[string]any)
		if !ok {
			*missing = append(*missing, path+name)
			continue
		}
		walkSchema(f.Type, sub, path+name+".", missing)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCRDManifestIsACopy(t *testing.T) {
	a := CRDManifest()
	a[0] = '!'
	if CRDManifest()[0] == '!' {
		t.Error("CRDManifest returns the embedded bytes, not a copy")
	}
}

// A record kept with --keep carries, per node, Antrea's summary of its hops
// as observations and every table hop (an observation with its table, flow
// and cookie) as tableHops. Stored through the CRD, nothing of it may be
// pruned or refused: structural pruning keeps only declared fields, except
// under x-kubernetes-preserve-unknown-fields, and each value must have its
// declared type.
func TestCRDKeepsAKeptRecord(t *testing.T) {
	full := report.Observation{Component: report.ComponentNetworkPolicy, ComponentInfo: "IngressMetric", Action: report.ActionDropped,
		Pod: "default/b", DstMAC: "aa:bb:cc:dd:ee:ff", NetworkPolicy: "unknown", NetworkPolicyRule: "conjunction 9", Egress: "e",
		TTL: 63, TranslatedSrcIP: "10.0.0.1", TranslatedDstIP: "10.0.0.2", TunnelDstIP: "192.168.0.2", EgressIP: "10.0.0.3",
		EgressNode: "n3", SrcPodIP: "10.244.1.5", Inferred: true}
	tf := Traceflow{Status: Status{Phase: PhaseSucceeded, Results: []report.NodeResult{{
		Node: "n1", Role: report.RoleSender, Timestamp: 1796117873,
		Observations: []report.Observation{full},
		TableHops: []report.TableHop{{Table: 26, TableName: "IngressMetric", Flow: "priority=200,reg3=0x9 actions=drop",
			Cookie: "0x7f00000000000007", Observation: full}},
	}}}}
	b, err := json.Marshal(tf.Status)
	if err != nil {
		t.Fatal(err)
	}
	var status map[string]any
	if err := json.Unmarshal(b, &status); err != nil {
		t.Fatal(err)
	}
	root := dig(t, loadCRD(t), "spec", "versions").([]any)[0]
	schema := dig(t, root, "schema", "openAPIV3Schema", "properties", "status").(map[string]any)
	var problems []string
	stored := prune(status, schema, "status", &problems)
	if len(problems) > 0 {
		t.Errorf("the API server would refuse the record:\n  %s", strings.Join(problems, "\n  "))
	}
	if d := cmp.Diff(status, stored); d != "" {
		t.Errorf("the API server would prune the record (-written +stored):\n%s", d)
	}
}

// prune is what an API server stores of v under a structural schema: fields
// the schema does not declare are dropped unless it preserves unknown
// fields; a value of another type than declared is a problem.
func prune(v any, schema map[string]any, path string, problems *[]string) any {
	kind := map[string]string{"object": "map[string]interface {}", "array": "[]interface {}", "string": "string",
		"integer": "float64", "number": "float64", "boolean": "bool"}
	if want, ok := schema["type"].(string); ok && kind[want] != fmt.Sprintf("%T", v) {
		*problems = append(*problems, fmt.Sprintf("%s: %T, schema says %s", path, v, want))
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		keep, _ := schema["x-kubernetes-preserve-unknown-fields"].(bool)
		out := map[string]any{}
		for k, val := range x {
			if sub, ok := props[k].(map[string]any); ok {
				out[k] = prune(val, sub, path+"."+k, problems)
			} else if keep {
				out[k] = val
			}
		}
		return out
	case []any:
		items, _ := schema["items"].(map[string]any)
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = prune(val, items, fmt.Sprintf("%s[%d]", path, i), problems)
		}
		return out
	}
	return v
}
