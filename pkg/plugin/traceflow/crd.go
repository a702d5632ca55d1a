package traceflow

import (
	_ "embed"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CRDName is the name of the Traceflow CustomResourceDefinition.
const CRDName = Resource + "." + Group

// crdManifest is embedded so that the binary alone can install the CRD on a
// cluster without Antrea.
//
//go:embed crd.yaml
var crdManifest []byte

// CRDManifest returns the apiextensions.k8s.io/v1 CustomResourceDefinition
// for Traceflow, as YAML. The caller gets its own copy.
func CRDManifest() []byte {
	return append([]byte(nil), crdManifest...)
}

// CRDsResource is where CustomResourceDefinitions live: where the Traceflow
// CRD is installed and read back.
var CRDsResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
