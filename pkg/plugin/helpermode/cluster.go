// Package helpermode is the plugin acting as the Traceflow controller where
// no agent runs: it claims a tag, records the trace, starts helper pods on
// the receiver nodes and then the sender, follows their reports, merges them
// into the record and the view, and removes everything it created on every
// exit path.
package helpermode

import (
	"context"
	"errors"
	"io"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/ptr"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/apierr"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/labels"
)

// Cluster is what the runner needs of the API server.
type Cluster interface {
	CreatePod(ctx context.Context, pod *corev1.Pod) error
	// StopPods asks the kubelets to stop every helper pod of trace: a
	// graceful delete, which sends the helpers SIGTERM.
	StopPods(ctx context.Context, namespace, trace string) error
	// DeletePods deletes every helper pod of trace, at once.
	DeletePods(ctx context.Context, namespace, trace string) error
	// WatchPods watches the helper pods of trace.
	WatchPods(ctx context.Context, namespace, trace string) (watch.Interface, error)
	// WatchEvents watches the events about pods in namespace.
	WatchEvents(ctx context.Context, namespace string) (watch.Interface, error)
	// Logs follows the output of a pod's helper container.
	Logs(ctx context.Context, namespace, pod string) (io.ReadCloser, error)
	// Attach streams stdin to a pod's helper container, and its standard
	// output and error to stdout and stderr where not nil, until the
	// container's streams end.
	Attach(ctx context.Context, namespace, pod string, stdin io.Reader, stdout, stderr io.Writer) error
}

// NewCluster returns a Cluster over a clientset. Watches and log streams,
// which last as long as the trace, go through streams where it is not nil
// (a clientset without --request-timeout); cfg serves attach, which streams
// over its own connection.
func NewCluster(cs, streams kubernetes.Interface, cfg *rest.Config) Cluster {
	if streams == nil {
		streams = cs
	}
	return clientsetCluster{cs, streams, cfg}
}

type clientsetCluster struct {
	cs      kubernetes.Interface
	streams kubernetes.Interface
	cfg     *rest.Config
}

func traceSelector(trace string) string {
	return labels.ManagedBy + "=" + labels.Manager + "," + labels.Trace + "=" + trace
}

func (c clientsetCluster) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	_, err := c.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: labels.Manager})
	return err
}

func (c clientsetCluster) StopPods(ctx context.Context, namespace, trace string) error {
	return c.deletePods(ctx, namespace, trace, nil)
}

// DeletePods deletes with grace period 0: the API objects go at once. The
// runner calls it once the helpers have said their flows are gone (or
// could not), so nothing of the trace is left to a SIGTERM still on its
// way.
func (c clientsetCluster) DeletePods(ctx context.Context, namespace, trace string) error {
	return c.deletePods(ctx, namespace, trace, ptr.To(int64(0)))
}

func (c clientsetCluster) deletePods(ctx context.Context, namespace, trace string, grace *int64) error {
	err := c.cs.CoreV1().Pods(namespace).DeleteCollection(ctx,
		metav1.DeleteOptions{GracePeriodSeconds: grace},
		metav1.ListOptions{LabelSelector: traceSelector(trace)})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c clientsetCluster) WatchPods(ctx context.Context, namespace, trace string) (watch.Interface, error) {
	return c.streams.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: traceSelector(trace)})
}

func (c clientsetCluster) WatchEvents(ctx context.Context, namespace string) (watch.Interface, error) {
	return c.streams.CoreV1().Events(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.kind", "Pod").String(),
	})
}

func (c clientsetCluster) Attach(ctx context.Context, namespace, pod string, stdin io.Reader, stdout, stderr io.Writer) error {
	if c.cfg == nil {
		return errors.New("no REST config to attach with")
	}
	req := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: helperpod.ContainerName, Stdin: true, Stdout: stdout != nil, Stderr: stderr != nil}, scheme.ParameterCodec)
	// WebSockets first (the default since Kubernetes 1.31), SPDY where a
	// proxy or an older API server refuses the upgrade.
	ws, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.cfg, "POST", req.URL())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

func (c clientsetCluster) Logs(ctx context.Context, namespace, pod string) (io.ReadCloser, error) {
	return c.streams.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: helperpod.ContainerName,
		Follow:    true,
	}).Stream(ctx)
}

// apiFailure classifies an API error: Forbidden names the missing verb and
// resource; everything else is a setup failure.
func apiFailure(err error, verb, resource, ns string) error {
	where := "cluster-wide"
	if ns != "" {
		where = "in namespace " + ns
	}
	return apierr.Wrap(err, apierr.Messages{
		PodSecurity: apierr.Say{Before: "namespace " + ns + " enforces a PodSecurity level that rejects helper pods (they need hostNetwork and a hostPath of the OVS run directory, i.e. level privileged): " +
			"leave --helper-namespace out to use traceflow-system (made by `kubectl traceflow install`), or label " + ns + " pod-security.kubernetes.io/enforce=privileged: "},
		Forbidden: apierr.Say{Before: "not allowed to " + verb + " " + resource + " " + where + ": grant it (see the README's RBAC section) or use --helper-namespace: "},
		Other:     apierr.Say{Before: verb + " " + resource + ": "},
	})
}
