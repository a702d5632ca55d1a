// Command lab-ovnkube is the lab's OVN controller, the role ovnkube-controller
// plays in OVN-Kubernetes: it watches the cluster and writes OVN's northbound
// database (ovn_cluster_router, a switch per node, a port per pod, load
// balancers for ClusterIP Services, port groups and ACLs for NetworkPolicies)
// as OVN-Kubernetes shapes it; see test/lab/ovnk. It runs on the lab host
// until killed and logs to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-traceflow/kubectl-traceflow/test/lab/ovnk"
)

// options are the raw flags (Complete turns them into clients).
type options struct {
	kubeconfig, nb, sb, logFile, hairpinSNATIP, outside string

	logger *log.Logger
	cs     kubernetes.Interface
}

func main() {
	o := &options{}
	fs := flag.NewFlagSet("lab-ovnkube", flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the lab's API server")
	fs.StringVar(&o.nb, "nb", "", "northbound database, unix:PATH")
	fs.StringVar(&o.sb, "sb", "", "southbound database, unix:PATH (accepted for ovnkube's shape; not written)")
	fs.StringVar(&o.logFile, "log", "", "also log to this file")
	fs.StringVar(&o.hairpinSNATIP, "hairpin-snat-ip", ovnk.HairpinSNATIP,
		`load balancers' hairpin_snat_ip; pods must route it back through OVN ("" uses the VIP)`)
	fs.StringVar(&o.outside, "outside", "", "networks outside the cluster that pods reach through their node's management port, masqueraded there (comma-separated prefixes)")
	_ = fs.Parse(os.Args[1:])
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	err := o.complete()
	if err == nil {
		err = o.validate()
	}
	if err == nil {
		err = o.run(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab-ovnkube: %v\n", err)
		os.Exit(1)
	}
}

func (o *options) complete() error {
	var w io.Writer = os.Stderr
	if o.logFile != "" {
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("-log: %w", err)
		}
		w = io.MultiWriter(os.Stderr, f)
	}
	o.logger = log.New(w, "lab-ovnkube: ", log.LstdFlags|log.Lmicroseconds)
	if o.kubeconfig == "" {
		return nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("-kubeconfig: %w", err)
	}
	if o.cs, err = kubernetes.NewForConfig(rc); err != nil {
		return fmt.Errorf("-kubeconfig: %w", err)
	}
	return nil
}

func (o *options) validate() error {
	if o.kubeconfig == "" {
		return errors.New("-kubeconfig is required")
	}
	if !strings.HasPrefix(o.nb, "unix:") {
		return fmt.Errorf("-nb %q: want unix:PATH to the northbound ovsdb-server", o.nb)
	}
	if o.sb != "" && !strings.HasPrefix(o.sb, "unix:") {
		return fmt.Errorf("-sb %q: want unix:PATH", o.sb)
	}
	return nil
}

// run connects to the NB database and runs the controller until ctx ends or
// the database goes away (the lab restarts both together).
func (o *options) run(ctx context.Context) error {
	nb, err := connectNB(ctx, o.nb)
	if err != nil {
		return err
	}
	defer nb.Close()
	c, err := ovnk.NewController(o.cs, nb, o.hairpinSNATIP, o.logger)
	if err == nil {
		var outside []netip.Prefix
		if outside, err = parsePrefixes(o.outside); err == nil {
			c.ReachOutside(outside)
		}
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-nb.DisconnectNotify():
			cancel(fmt.Errorf("lost the northbound database at %s", o.nb))
		case <-ctx.Done():
		}
	}()
	o.logger.Printf("watching the cluster, writing %s", o.nb)
	if err := c.Run(ctx); err != nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// connectNB connects and monitors the tables the controller owns; the first
// sync reads them from the cache.
func connectNB(ctx context.Context, endpoint string) (client.Client, error) {
	dbModel, err := ovnk.NBModel()
	if err != nil {
		return nil, fmt.Errorf("NB model: %w", err)
	}
	discard := logr.Discard()
	nb, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(endpoint), client.WithLogger(&discard))
	if err != nil {
		return nil, fmt.Errorf("NB client: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := nb.Connect(cctx); err != nil {
		return nil, fmt.Errorf("connect to the northbound database at %s: %w", endpoint, err)
	}
	if _, err := nb.MonitorAll(cctx); err != nil {
		nb.Close()
		return nil, fmt.Errorf("monitor the northbound database at %s: %w", endpoint, err)
	}
	return nb, nil
}

// parsePrefixes reads -outside: comma-separated prefixes, or none.
func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("-outside: %w", err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
