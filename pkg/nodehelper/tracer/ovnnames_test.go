package tracer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ofproto"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/ovn"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/nodehelper/report"
)

// readOVSDBList reads `ovn-sbctl -f json list TABLE` (or ovn-nbctl's) into
// rows, matching headings to the rows' ovsdb tags: uuids as
// ["uuid", "..."], sets as ["set", [...]], maps as ["map", [[k, v]...]].
func readOVSDBList(t *testing.T, dir, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Data     [][]any  `json:"data"`
		Headings []string `json:"headings"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	slice := reflect.ValueOf(into).Elem()
	rowType := slice.Type().Elem()
	for _, data := range doc.Data {
		row := reflect.New(rowType).Elem()
		for i, h := range doc.Headings {
			for f := 0; f < rowType.NumField(); f++ {
				if rowType.Field(f).Tag.Get("ovsdb") == h {
					setOVSDB(t, row.Field(f), data[i])
				}
			}
		}
		slice.Set(reflect.Append(slice, row))
	}
}

func setOVSDB(t *testing.T, f reflect.Value, v any) {
	t.Helper()
	if a, ok := v.([]any); ok && len(a) == 2 {
		switch a[0] {
		case "uuid":
			v = a[1]
		case "set":
			elems, _ := a[1].([]any)
			if f.Kind() == reflect.Pointer {
				if len(elems) == 0 {
					return
				}
				v = elems[0]
				break
			}
			s := reflect.MakeSlice(f.Type(), 0, len(elems))
			for _, e := range elems {
				ev := reflect.New(f.Type().Elem()).Elem()
				setOVSDB(t, ev, e)
				s = reflect.Append(s, ev)
			}
			f.Set(s)
			return
		case "map":
			m := reflect.MakeMap(f.Type())
			pairs, _ := a[1].([]any)
			for _, p := range pairs {
				kv := p.([]any)
				m.SetMapIndex(reflect.ValueOf(fmt.Sprint(kv[0])), reflect.ValueOf(fmt.Sprint(kv[1])))
			}
			f.Set(m)
			return
		}
	}
	if a, ok := v.([]any); ok && len(a) == 2 && a[0] == "uuid" {
		v = a[1]
	}
	switch f.Kind() {
	case reflect.Pointer:
		s := fmt.Sprint(v)
		f.Set(reflect.ValueOf(&s))
	case reflect.String:
		f.SetString(fmt.Sprint(v))
	case reflect.Int:
		n, _ := v.(float64)
		f.SetInt(int64(n))
	case reflect.Slice:
		ev := reflect.New(f.Type().Elem()).Elem()
		setOVSDB(t, ev, v)
		f.Set(reflect.Append(reflect.MakeSlice(f.Type(), 0, 1), ev))
	default:
		t.Fatalf("cannot set %s from %v", f.Kind(), v)
	}
}

// recordedOVN is the southbound and northbound rows record-ovn.sh saved
// with its traces in dir (each recording has its own UUIDs, so its own rows).
func recordedOVN(t *testing.T, dir string) ovn.DB {
	var db ovn.DB
	readOVSDBList(t, dir, "ovn-sb-logical-flow.json", &db.LogicalFlows)
	readOVSDBList(t, dir, "ovn-sb-datapath-binding.json", &db.Datapaths)
	readOVSDBList(t, dir, "ovn-sb-logical-dp-group.json", &db.DPGroups)
	readOVSDBList(t, dir, "ovn-sb-port-binding.json", &db.PortBindings)
	readOVSDBList(t, dir, "ovn-nb-acl.json", &db.ACLs)
	readOVSDBList(t, dir, "ovn-nb-load-balancer.json", &db.LoadBalancers)
	if len(db.LogicalFlows) < 100 || len(db.Datapaths) != 3 || len(db.ACLs) != 2 || len(db.LoadBalancers) != 2 {
		t.Fatalf("recorded rows: %d logical flows, %d datapaths, %d ACLs, %d load balancers", len(db.LogicalFlows), len(db.Datapaths), len(db.ACLs), len(db.LoadBalancers))
	}
	return db
}

// Done-when 7 (issue 13): hops of recorded OVN traces named by the
// southbound rows recorded with them.
func TestOVNNamesOnRecordedTraces(t *testing.T) {
	for _, set := range recordedOVS {
		t.Run(set.version, func(t *testing.T) { ovnNamesOnRecorded(t, set.dir) })
	}
}

func ovnNamesOnRecorded(t *testing.T, dir string) {
	names := OVNNames{Tables: TableNames{}, Names: ovn.Index(recordedOVN(t, dir))}
	type want struct {
		table     uint8
		stage     string
		datapath  string
		component report.Component
		policy    string // Observation's networkPolicy
		object    string // the Kubernetes object behind the NB row
	}
	for name, tc := range map[string]struct {
		trace string
		hops  []want // hops that must be on the path, named so (in order)
	}{
		"ACL drop on the destination's switch": {"ovn-acl-drop.txt", []want{
			{46, "ls_out_acl", "rec-node2", report.ComponentNetworkPolicy, "rec/deny-b", "NetworkPolicy rec/deny-b"},
		}},
		"ACL reject": {"ovn-acl-reject.txt", []want{
			{46, "ls_out_acl", "rec-node2", report.ComponentNetworkPolicy, "rec/deny-b", "NetworkPolicy rec/deny-b"},
		}},
		"switch, router, switch across nodes": {"ovn-cross-node.txt", []want{
			{8, "ls_in_check_port_sec", "rec-node1", report.ComponentForwarding, "", ""},
			{16, "ls_in_acl", "rec-node1", report.ComponentNetworkPolicy, "", ""},
			{21, "lr_in_ip_routing", "ovn_cluster_router", report.ComponentRouting, "", ""},
			{39, "", "rec-node2", report.ComponentForwarding, "", ""},
		}},
		"load balancer": {"ovn-lb.txt", []want{
			{20, "ls_in_lb", "rec-node1", report.ComponentLB, "", "Service rec/svc"},
		}},
		"receiver: the destination switch's egress pipeline": {"ovn-receiver.txt", []want{
			{43, "ls_out_pre_lb", "rec-node2", report.ComponentLB, "", ""},
			{65, "", "rec-node2", report.ComponentForwarding, "", ""},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			tr := ofproto.Parse(readRecordedIn(t, dir, tc.trace), "br-int")
			next := 0
			var seen []string
			for _, h := range tr.Hops {
				hn := names.NameHop(h)
				seen = append(seen, fmt.Sprintf("%d %s", h.Table, hn.Where))
				if next >= len(tc.hops) {
					continue
				}
				w := tc.hops[next]
				if h.Table != w.table || hn.OVN == nil || hn.OVN.Stage != w.stage || hn.OVN.Datapath != w.datapath {
					continue
				}
				o := Observation(h, Verdict{Action: report.ActionForwarded}, names)
				if hn.Component != w.component || o.Component != w.component || o.NetworkPolicy != w.policy || hn.OVN.Object != w.object {
					t.Errorf("hop at table %d (%s): component %s, observation %+v, object %q; want %s, policy %q, object %q",
						h.Table, hn.Where, hn.Component, o, hn.OVN.Object, w.component, w.policy, w.object)
				}
				if hr := HopReport(0, h, names, true); hr.OVN == nil || hr.OVN.Stage != w.stage || hr.OVN.LogicalFlow == "" || (w.stage != "" && hr.TableName != w.stage) {
					t.Errorf("hop report %+v does not carry the stage %q and the logical flow", hr, w.stage)
				}
				next++
			}
			if next < len(tc.hops) {
				t.Errorf("hop %+v not found on the path; the path, named:\n%v", tc.hops[next], seen)
			}
		})
	}
}

// A cookie no southbound row carries (OVN's fixed flows carry 0) keeps its
// table number; a trace without OVN's rows names nothing by OVN.
func TestOVNNamesFallBack(t *testing.T) {
	names := OVNNames{Tables: TableNames{}, Names: ovn.Index(recordedOVN(t, recorded))}
	if hn := names.NameHop(ofproto.Hop{Table: 41, Priority: 0}); hn.OVN != nil || hn.Where != "table 41" {
		t.Errorf("cookie 0: %+v", hn)
	}
	if hn := names.NameHop(ofproto.Hop{Table: 44, Cookie: 0xdeadbeef}); hn.OVN != nil || hn.Where != "table 44" {
		t.Errorf("unknown cookie: %+v", hn)
	}
}
