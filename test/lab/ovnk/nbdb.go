package ovnk

import "github.com/ovn-kubernetes/libovsdb/model"

// The models below are the columns of OVN's northbound schema (7.0.0, OVN
// 23.03) this controller writes, written by hand and kept minimal so that they
// survive schema changes: a column left out is a column left alone.

// LogicalRouter is a row of the NB Logical_Router table.
type LogicalRouter struct {
	UUID         string            `ovsdb:"_uuid"`
	Name         string            `ovsdb:"name"`
	Ports        []string          `ovsdb:"ports"`
	StaticRoutes []string          `ovsdb:"static_routes"`
	Policies     []string          `ovsdb:"policies"`
	ExternalIDs  map[string]string `ovsdb:"external_ids"`
}

// LogicalRouterStaticRoute is a row of the NB Logical_Router_Static_Route
// table.
type LogicalRouterStaticRoute struct {
	UUID        string            `ovsdb:"_uuid"`
	IPPrefix    string            `ovsdb:"ip_prefix"`
	Nexthop     string            `ovsdb:"nexthop"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// LogicalRouterPolicy is a row of the NB Logical_Router_Policy table.
type LogicalRouterPolicy struct {
	UUID        string            `ovsdb:"_uuid"`
	Priority    int               `ovsdb:"priority"`
	Match       string            `ovsdb:"match"`
	Action      string            `ovsdb:"action"`
	Nexthops    []string          `ovsdb:"nexthops"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// LogicalRouterPort is a row of the NB Logical_Router_Port table.
type LogicalRouterPort struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	MAC         string            `ovsdb:"mac"`
	Networks    []string          `ovsdb:"networks"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// LogicalSwitch is a row of the NB Logical_Switch table.
type LogicalSwitch struct {
	UUID         string            `ovsdb:"_uuid"`
	Name         string            `ovsdb:"name"`
	Ports        []string          `ovsdb:"ports"`
	ACLs         []string          `ovsdb:"acls"`
	LoadBalancer []string          `ovsdb:"load_balancer"`
	OtherConfig  map[string]string `ovsdb:"other_config"`
	ExternalIDs  map[string]string `ovsdb:"external_ids"`
}

// LogicalSwitchPort is a row of the NB Logical_Switch_Port table.
type LogicalSwitchPort struct {
	UUID         string            `ovsdb:"_uuid"`
	Name         string            `ovsdb:"name"`
	Type         string            `ovsdb:"type"`
	Addresses    []string          `ovsdb:"addresses"`
	PortSecurity []string          `ovsdb:"port_security"`
	Options      map[string]string `ovsdb:"options"`
	ExternalIDs  map[string]string `ovsdb:"external_ids"`
}

// LoadBalancer is a row of the NB Load_Balancer table.
type LoadBalancer struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Protocol    *string           `ovsdb:"protocol"`
	Vips        map[string]string `ovsdb:"vips"`
	Options     map[string]string `ovsdb:"options"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// ACL is a row of the NB ACL table.
type ACL struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        *string           `ovsdb:"name"`
	Priority    int               `ovsdb:"priority"`
	Direction   string            `ovsdb:"direction"`
	Match       string            `ovsdb:"match"`
	Action      string            `ovsdb:"action"`
	Log         bool              `ovsdb:"log"`
	Options     map[string]string `ovsdb:"options"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// PortGroup is a row of the NB Port_Group table.
type PortGroup struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Ports       []string          `ovsdb:"ports"`
	ACLs        []string          `ovsdb:"acls"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// AddressSet is a row of the NB Address_Set table.
type AddressSet struct {
	UUID        string            `ovsdb:"_uuid"`
	Name        string            `ovsdb:"name"`
	Addresses   []string          `ovsdb:"addresses"`
	ExternalIDs map[string]string `ovsdb:"external_ids"`
}

// NBModel is the client model of the tables above.
func NBModel() (model.ClientDBModel, error) {
	return model.NewClientDBModel("OVN_Northbound", map[string]model.Model{
		"Logical_Router":              &LogicalRouter{},
		"Logical_Router_Port":         &LogicalRouterPort{},
		"Logical_Router_Policy":       &LogicalRouterPolicy{},
		"Logical_Router_Static_Route": &LogicalRouterStaticRoute{},
		"Logical_Switch":              &LogicalSwitch{},
		"Logical_Switch_Port":         &LogicalSwitchPort{},
		"Load_Balancer":               &LoadBalancer{},
		"ACL":                         &ACL{},
		"Port_Group":                  &PortGroup{},
		"Address_Set":                 &AddressSet{},
	})
}
