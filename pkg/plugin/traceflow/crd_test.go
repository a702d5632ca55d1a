package traceflow

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
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
		{[]string{"metadata", "labels", LabelManagedBy}, ManagedBy},
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
