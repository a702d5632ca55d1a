package ovn

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
)

// Endpoints says where the southbound and northbound databases are, from
// the southbound remote that ovn-controller uses (Open_vSwitch
// external_ids:ovn-remote), or why the helper cannot read them. The
// northbound database is looked for beside the southbound one: the
// ovnnb_db.sock next to a unix ovnsb_db.sock (OVN-Kubernetes'
// interconnect mode runs both on every node), port 6641 of a tcp remote on
// 6642.
func Endpoints(remote string) (sb, nb string, err error) {
	if remote == "" {
		return "", "", fmt.Errorf("the node's Open_vSwitch row has no external_ids:ovn-remote")
	}
	// ovn-remote may list several remotes; the first is enough.
	first := strings.Split(remote, ",")[0]
	switch {
	case strings.HasPrefix(first, "unix:"):
		path := strings.TrimPrefix(first, "unix:")
		return first, "unix:" + filepath.Join(filepath.Dir(path), "ovnnb_db.sock"), nil
	case strings.HasPrefix(first, "tcp:"):
		nb := first
		if strings.HasSuffix(first, ":6642") {
			nb = strings.TrimSuffix(first, ":6642") + ":6641"
		}
		return first, nb, nil
	case strings.HasPrefix(first, "ssl:"):
		return "", "", fmt.Errorf("the southbound database %s is reached over TLS, with ovn-controller's client certificate, which the helper does not have", first)
	}
	return "", "", fmt.Errorf("ovn-remote %q is not a unix, tcp or ssl remote", remote)
}

// Read reads the rows the names need: the southbound database must answer;
// the northbound one adds ACL and load-balancer rows where it does
// (db.NBUnread says why not).
func Read(ctx context.Context, sb, nb string, timeout time.Duration) (db DB, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	l, err := Watch(ctx, sb, nb)
	if err != nil {
		return db, err
	}
	defer l.Close()
	return l.db(ctx, false)
}

// Live is the rows the names need as monitors keep them: OVN's databases
// send every change to those rows as they commit it, so DB answers from
// memory what Read reads anew. A long-lived helper (serve) keeps one for
// its traces: a read connects, reads the schemas and receives every
// logical flow, which took 33 to 86 ms a trace in the lab's OVN mode.
type Live struct {
	sb, nb client.Client
	// nbUnread says why the northbound database is not monitored.
	nbUnread string
}

// Watch connects to the southbound database at sb, which must answer, and
// the northbound one at nb, and monitors the rows the names need. The
// connections outlive ctx; Close ends them.
func Watch(ctx context.Context, sb, nb string) (*Live, error) {
	sbModel, err := model.NewClientDBModel("OVN_Southbound", map[string]model.Model{
		"Logical_Flow": &LogicalFlow{}, "Datapath_Binding": &DatapathBinding{}, "Logical_DP_Group": &DPGroup{}, "Port_Binding": &PortBinding{},
	})
	if err != nil {
		return nil, err
	}
	c, err := connect(ctx, sbModel, sb)
	if err != nil {
		return nil, fmt.Errorf("connect to the southbound database at %s: %w", sb, err)
	}
	var lf LogicalFlow
	var dp DatapathBinding
	var g DPGroup
	var pb PortBinding
	if _, err := c.Monitor(ctx, c.NewMonitor(
		client.WithTable(&lf, &lf.UUID, &lf.LogicalDatapath, &lf.LogicalDPGroup, &lf.Pipeline, &lf.TableID, &lf.Priority, &lf.Match, &lf.Actions, &lf.ExternalIDs),
		client.WithTable(&dp, &dp.UUID, &dp.TunnelKey, &dp.ExternalIDs),
		client.WithTable(&g, &g.UUID, &g.Datapaths),
		client.WithTable(&pb, &pb.UUID, &pb.LogicalPort, &pb.Type, &pb.Datapath, &pb.TunnelKey),
	)); err != nil {
		c.Close()
		return nil, fmt.Errorf("read the southbound database: %w", err)
	}
	l := &Live{sb: c}
	if l.nb, err = watchNB(ctx, nb); err != nil {
		l.nbUnread = err.Error()
	}
	return l, nil
}

// DB is the rows as the databases hold them now: as fresh as a Read. Each
// database is first asked for an echo: a server sends a session's messages
// in order, and libovsdb applies each update to its cache as it reads it,
// so once the echo is answered the cache holds every change committed
// before it.
func (l *Live) DB(ctx context.Context) (DB, error) {
	return l.db(ctx, true)
}

// db lists the monitors' rows, after an echo to each database where echo
// is set; monitors that have just begun hold the current rows already.
func (l *Live) db(ctx context.Context, echo bool) (db DB, err error) {
	if echo {
		if err := l.sb.Echo(ctx); err != nil {
			return db, fmt.Errorf("read the southbound database: %w", err)
		}
	}
	for _, list := range []any{&db.LogicalFlows, &db.Datapaths, &db.DPGroups, &db.PortBindings} {
		if err := l.sb.List(ctx, list); err != nil {
			return db, fmt.Errorf("read the southbound database: %w", err)
		}
	}
	db.NBUnread = l.nbUnread
	if l.nb == nil {
		return db, nil
	}
	if echo {
		err = l.nb.Echo(ctx)
	}
	if err == nil {
		err = l.nb.List(ctx, &db.ACLs)
	}
	if err == nil {
		err = l.nb.List(ctx, &db.LoadBalancers)
	}
	if err != nil {
		db.ACLs, db.LoadBalancers, db.NBUnread = nil, nil, fmt.Sprintf("read the northbound database: %v", err)
	}
	return db, nil
}

// Connected reports whether the monitors still run: after a connection
// broke, DB would answer from a past state.
func (l *Live) Connected() bool {
	return l.sb.Connected() && (l.nb == nil || l.nb.Connected())
}

// Close ends the monitors.
func (l *Live) Close() {
	l.sb.Close()
	if l.nb != nil {
		l.nb.Close()
	}
}

func watchNB(ctx context.Context, nb string) (client.Client, error) {
	nbModel, err := model.NewClientDBModel("OVN_Northbound", map[string]model.Model{"ACL": &ACL{}, "Load_Balancer": &LoadBalancer{}})
	if err != nil {
		return nil, err
	}
	c, err := connect(ctx, nbModel, nb)
	if err != nil {
		return nil, fmt.Errorf("connect to the northbound database at %s: %w", nb, err)
	}
	var a ACL
	var l LoadBalancer
	if _, err := c.Monitor(ctx, c.NewMonitor(
		client.WithTable(&a, &a.UUID, &a.Direction, &a.Priority, &a.Match, &a.Action, &a.ExternalIDs),
		client.WithTable(&l, &l.UUID, &l.Name, &l.ExternalIDs),
	)); err != nil {
		c.Close()
		return nil, fmt.Errorf("read the northbound database: %w", err)
	}
	return c, nil
}

func connect(ctx context.Context, m model.ClientDBModel, endpoint string) (client.Client, error) {
	discard := logr.Discard()
	c, err := client.NewOVSDBClient(m, client.WithEndpoint(endpoint), client.WithLogger(&discard))
	if err != nil {
		return nil, err
	}
	if err := c.Connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}
