// Package ovn names the hops of a trace through an OVN-programmed bridge
// in OVN's own words: for each OpenFlow flow, the southbound row behind its
// cookie (a Logical_Flow, with its stage and datapath, or a Port_Binding),
// and through the logical flow's stage-hint the northbound ACL or load
// balancer with the Kubernetes object OVN-Kubernetes recorded on it.
//
// ovn-controller gives every flow it installs the first 32 bits of the
// UUID of the southbound row it comes from as its cookie; northd gives a
// logical flow made for an ACL or load balancer the first 32 bits of that
// northbound row's UUID as external_ids:stage-hint, and its stage as
// external_ids:stage-name. The models here are hand-written and minimal
// (the columns read), so that they survive schema changes.
package ovn

// LogicalFlow is the part of the southbound Logical_Flow table read.
type LogicalFlow struct {
	UUID            string            `ovsdb:"_uuid" json:"uuid"`
	LogicalDatapath *string           `ovsdb:"logical_datapath" json:"logicalDatapath,omitempty"`
	LogicalDPGroup  *string           `ovsdb:"logical_dp_group" json:"logicalDPGroup,omitempty"`
	Pipeline        string            `ovsdb:"pipeline" json:"pipeline"`
	TableID         int               `ovsdb:"table_id" json:"tableID"`
	Priority        int               `ovsdb:"priority" json:"priority"`
	Match           string            `ovsdb:"match" json:"match"`
	Actions         string            `ovsdb:"actions" json:"actions"`
	ExternalIDs     map[string]string `ovsdb:"external_ids" json:"externalIDs,omitempty"`
}

// DatapathBinding is the part of the southbound Datapath_Binding table read.
type DatapathBinding struct {
	UUID        string            `ovsdb:"_uuid" json:"uuid"`
	TunnelKey   int               `ovsdb:"tunnel_key" json:"tunnelKey"`
	ExternalIDs map[string]string `ovsdb:"external_ids" json:"externalIDs,omitempty"`
}

// DPGroup is the part of the southbound Logical_DP_Group table read.
type DPGroup struct {
	UUID      string   `ovsdb:"_uuid" json:"uuid"`
	Datapaths []string `ovsdb:"datapaths" json:"datapaths"`
}

// PortBinding is the part of the southbound Port_Binding table read.
type PortBinding struct {
	UUID        string `ovsdb:"_uuid" json:"uuid"`
	LogicalPort string `ovsdb:"logical_port" json:"logicalPort"`
	Type        string `ovsdb:"type" json:"type"`
	Datapath    string `ovsdb:"datapath" json:"datapath"`
	// TunnelKey is read because libovsdb monitors a table's index columns
	// (Port_Binding's [datapath, tunnel_key]) whatever is asked for, and
	// fails on a column the model lacks.
	TunnelKey int `ovsdb:"tunnel_key" json:"tunnelKey"`
}

// ACL is the part of the northbound ACL table read.
type ACL struct {
	UUID        string            `ovsdb:"_uuid" json:"uuid"`
	Direction   string            `ovsdb:"direction" json:"direction"`
	Priority    int               `ovsdb:"priority" json:"priority"`
	Match       string            `ovsdb:"match" json:"match"`
	Action      string            `ovsdb:"action" json:"action"`
	ExternalIDs map[string]string `ovsdb:"external_ids" json:"externalIDs,omitempty"`
}

// LoadBalancer is the part of the northbound Load_Balancer table read.
type LoadBalancer struct {
	UUID        string            `ovsdb:"_uuid" json:"uuid"`
	Name        string            `ovsdb:"name" json:"name"`
	ExternalIDs map[string]string `ovsdb:"external_ids" json:"externalIDs,omitempty"`
}

// DB is what the helper read of the two databases. NB rows are empty
// where the northbound database could not be read.
type DB struct {
	LogicalFlows  []LogicalFlow     `json:"logicalFlows"`
	Datapaths     []DatapathBinding `json:"datapaths"`
	DPGroups      []DPGroup         `json:"dpGroups,omitempty"`
	PortBindings  []PortBinding     `json:"portBindings"`
	ACLs          []ACL             `json:"acls,omitempty"`
	LoadBalancers []LoadBalancer    `json:"loadBalancers,omitempty"`
	// NBUnread says why the northbound rows are missing, if they are.
	NBUnread string `json:"-"`
}
