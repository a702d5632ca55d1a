package tracer

import (
	"context"
	"fmt"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovn"
)

// ovnReadBudget bounds the read of OVN's databases: names are worth a
// moment, not the verdict.
const ovnReadBudget = 3 * time.Second

// readOVNNames reads OVN's southbound (and northbound) rows on a node where
// ovn-controller runs, so that hops are named by their logical flows. Where
// the databases cannot be read, the hops keep their table numbers and the
// returned sentence says why; the trace runs either way.
func readOVNNames(ctx context.Context, cache *NodeCache, tables TableNames, remote string, logf func(string, ...any)) (Namer, string) {
	sb, nb, err := ovn.Endpoints(remote)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, ovnReadBudget)
		defer cancel()
		var db ovn.DB
		if db, err = cache.ovnDB(ctx, sb, nb); err == nil {
			if db.NBUnread != "" {
				logf("OVN's northbound database is not readable (%s): hops name their logical flows, not the ACLs and load balancers behind them", db.NBUnread)
			}
			logf("OVN: %d logical flows, %d port bindings, %d ACLs, %d load balancers read", len(db.LogicalFlows), len(db.PortBindings), len(db.ACLs), len(db.LoadBalancers))
			return OVNNames{Tables: tables, Names: ovn.Index(db)}, ""
		}
	}
	why := fmt.Sprintf("OVN programs this bridge, but its southbound database cannot be read (%v): hops carry OpenFlow table numbers only, not OVN's logical flows (mount the node's /var/run/ovn into the helper)", err)
	logf("%s", why)
	return tables, why
}
