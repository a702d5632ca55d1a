package traceflow

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Client reads and writes Traceflow objects. It is the only way the plugin
// touches them, so engines and tests can swap it for a fake.
type Client interface {
	Create(ctx context.Context, tf *Traceflow) (*Traceflow, error)
	Get(ctx context.Context, name string) (*Traceflow, error)
	// UpdateStatus writes tf.Status through the status subresource (the
	// helper engine acts as the controller).
	UpdateStatus(ctx context.Context, tf *Traceflow) (*Traceflow, error)
	Delete(ctx context.Context, name string) error
	// List lists the Traceflows matching a label selector ("" for all).
	List(ctx context.Context, selector string) ([]Traceflow, error)
	// Watch watches the one Traceflow called name from resourceVersion
	// ("" for the API server's choice); decode events with FromObject.
	Watch(ctx context.Context, name, resourceVersion string) (watch.Interface, error)
	// Relist lists the one Traceflow called name from the API server's
	// watch cache (resourceVersion 0), to resume a watch that ended: it
	// returns the object (nil where the list has none) and the list's
	// resourceVersion, which the cache knows, to watch from.
	Relist(ctx context.Context, name string) (*Traceflow, string, error)
}

// NewClient returns a Client over the dynamic client: no generated
// clientset is needed for one resource. Watches go through streams where
// it is not nil: a client without --request-timeout, which would cut a
// watch that lasts as long as the trace.
func NewClient(dyn, streams dynamic.Interface) Client {
	if streams == nil {
		streams = dyn
	}
	return &dynamicClient{res: dyn.Resource(GroupVersionResource), watches: streams.Resource(GroupVersionResource)}
}

type dynamicClient struct {
	res     dynamic.NamespaceableResourceInterface
	watches dynamic.NamespaceableResourceInterface
}

func (c *dynamicClient) Create(ctx context.Context, tf *Traceflow) (*Traceflow, error) {
	u, err := ToUnstructured(tf)
	if err != nil {
		return nil, err
	}
	out, err := c.res.Create(ctx, u, metav1.CreateOptions{FieldManager: labels.Manager})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(out)
}

func (c *dynamicClient) Get(ctx context.Context, name string) (*Traceflow, error) {
	out, err := c.res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(out)
}

func (c *dynamicClient) UpdateStatus(ctx context.Context, tf *Traceflow) (*Traceflow, error) {
	u, err := ToUnstructured(tf)
	if err != nil {
		return nil, err
	}
	out, err := c.res.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: labels.Manager})
	if err != nil {
		return nil, err
	}
	return FromUnstructured(out)
}

func (c *dynamicClient) Delete(ctx context.Context, name string) error {
	return c.res.Delete(ctx, name, metav1.DeleteOptions{})
}

func (c *dynamicClient) List(ctx context.Context, selector string) ([]Traceflow, error) {
	l, err := c.res.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	out := make([]Traceflow, 0, len(l.Items))
	for i := range l.Items {
		tf, err := FromUnstructured(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *tf)
	}
	return out, nil
}

func (c *dynamicClient) Watch(ctx context.Context, name, resourceVersion string) (watch.Interface, error) {
	return c.watches.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: resourceVersion,
	})
}

func (c *dynamicClient) Relist(ctx context.Context, name string) (*Traceflow, string, error) {
	l, err := c.res.List(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: "0",
	})
	if err != nil {
		return nil, "", err
	}
	for i := range l.Items {
		if l.Items[i].GetName() == name {
			tf, err := FromUnstructured(&l.Items[i])
			return tf, l.GetResourceVersion(), err
		}
	}
	return nil, l.GetResourceVersion(), nil
}

// ToUnstructured converts tf for the dynamic client, filling in its
// apiVersion and kind.
func ToUnstructured(tf *Traceflow) (*unstructured.Unstructured, error) {
	// A shallow copy is enough: the converter only reads.
	obj := *tf
	obj.APIVersion, obj.Kind = APIVersion, Kind
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&obj)
	if err != nil {
		return nil, fmt.Errorf("converting Traceflow %s: %w", tf.Name, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// FromUnstructured converts what the dynamic client returns into a Traceflow.
func FromUnstructured(u *unstructured.Unstructured) (*Traceflow, error) {
	if gvk := u.GroupVersionKind(); gvk.Group != Group || gvk.Kind != Kind {
		return nil, fmt.Errorf("object %s is a %s, not a %s", u.GetName(), gvk, APIVersion+" "+Kind)
	}
	tf := &Traceflow{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, tf); err != nil {
		return nil, fmt.Errorf("decoding Traceflow %s: %w", u.GetName(), err)
	}
	return tf, nil
}

// FromObject decodes the object of a watch event.
func FromObject(obj runtime.Object) (*Traceflow, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected %T in a Traceflow watch", obj)
	}
	return FromUnstructured(u)
}
