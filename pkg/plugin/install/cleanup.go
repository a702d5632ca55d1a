package install

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/sweep"
)

// CleanupOptions say what `kubectl traceflow cleanup` removes.
type CleanupOptions struct {
	// Namespace holds the helper pods and tag claims; AllNamespaces looks
	// in every namespace instead, and reads the API server's clock in
	// DefaultNamespace.
	Namespace     string
	AllNamespaces bool
	// AllRecords also removes finished records that --keep left.
	AllRecords bool
	// Force removes what is not stale too, and goes on without the API
	// server's clock.
	Force bool
	// DryRun lists without deleting.
	DryRun bool
	// Traces, when set, limits the cleanup to these traces' objects.
	Traces []string
	// AgainAfter, when set, sweeps a second time after this long: what an
	// interrupted plugin asked the API server to create an instant before
	// it exited may be created after the first sweep listed.
	AgainAfter time.Duration
}

// Cleanup removes what interrupted traces left in the cluster (helper
// pods, tag claims, unfinished records; see package sweep), judging what is
// stale by the API server's clock. Like Remove for what install put there,
// it is the plugin taking its own objects out of a cluster. It returns what
// it removed (or would remove) even when it also returns an error, which
// says what to do.
func Cleanup(ctx context.Context, kube kubernetes.Interface, records sweep.Records, o CleanupOptions) (sweep.Removed, error) {
	ns, clockNS := o.Namespace, o.Namespace
	if o.AllNamespaces {
		ns, clockNS = "", DefaultNamespace
	}
	now, err := sweep.ServerNow(ctx, kube, clockNS)
	if err != nil && !o.Force {
		return sweep.Removed{}, fmt.Errorf("read the API server's clock (a dry-run create of a Lease in %s) to tell what is stale: %w; check your RBAC, or use --force", clockNS, err)
	}
	opts := sweep.Options{Namespace: ns, AllRecords: o.AllRecords, Force: o.Force, DryRun: o.DryRun, Now: now, Traces: o.Traces}
	removed, err := sweep.Sweep(ctx, kube, records, opts)
	if o.AgainAfter > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(o.AgainAfter):
			opts.Now = opts.Now.Add(o.AgainAfter)
			more, merr := sweep.Sweep(ctx, kube, records, opts)
			err = errors.Join(err, merr)
			removed.Pods = append(removed.Pods, more.Pods...)
			removed.Leases = append(removed.Leases, more.Leases...)
			removed.Records = append(removed.Records, more.Records...)
			removed.Live = more.Live
		}
	}
	if err != nil {
		return removed, fmt.Errorf("cleanup was incomplete: %w; check your RBAC (delete pods, delete leases, delete traceflows)", err)
	}
	return removed, nil
}
