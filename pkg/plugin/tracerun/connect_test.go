package tracerun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// --request-timeout bounds each call, but a watch lives as long as the
// trace: an API server that holds a plain GET longer than the timeout fails
// that call, while a watch through Streams still delivers an event sent
// three timeouts after it opened.
func TestConnectRequestTimeoutSparesStreams(t *testing.T) {
	const timeout = 200 * time.Millisecond
	second := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1/namespaces/ns/pods" && r.URL.Query().Get("watch") == "true":
			w.Header().Set("Content-Type", "application/json")
			event := func(name string) {
				fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns"}}}`+"\n", name)
				w.(http.Flusher).Flush()
			}
			event("first")
			select {
			case <-time.After(3 * timeout):
				event("second")
				close(second)
			case <-r.Context().Done():
				return
			}
			<-r.Context().Done()
		case r.URL.Path == "/api/v1/namespaces/ns/pods/slow":
			<-r.Context().Done() // never answers: the client's timeout must end it
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ns}}]
current-context: x
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	cf := genericclioptions.NewConfigFlags(false)
	*cf.KubeConfig = kubeconfig
	*cf.Timeout = timeout.String()
	c, err := Connect(cf)
	if err != nil {
		t.Fatal(err)
	}

	// The server never answers this GET: that it returns at all, with a
	// timeout error, is the proof that --request-timeout ended it (no
	// clock needed; without the timeout the call would hang).
	_, err = c.Kube.CoreV1().Pods("ns").Get(context.Background(), "slow", metav1.GetOptions{})
	var netErr net.Error
	if err == nil || !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Errorf("a GET the server never answers: err %v; want a timeout error from --request-timeout %s", err, timeout)
	}
	start := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := c.Streams.CoreV1().Pods("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []string{"first", "second"} {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended after %s, before event %q: --request-timeout %s cut it", time.Since(start).Round(time.Millisecond), want, timeout)
			}
			m, isObj := ev.Object.(metav1.Object)
			if !isObj || m.GetName() != want {
				t.Fatalf("event %+v, want pod %q", ev, want)
			}
		case <-ctx.Done():
			t.Fatalf("no event %q", want)
		}
	}
	<-second
	if c.RESTConfig == nil || c.RESTConfig.Timeout != 0 {
		t.Errorf("attach's config carries a timeout (%v): an attach lasts the trace", c.RESTConfig)
	}
}
