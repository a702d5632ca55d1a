package ovnk

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Names and keys of OVN-Kubernetes (go-controller/pkg/types/const.go and
// pkg/libovsdb/ops/db_object_types.go), so that a trace through this lab reads
// like a trace through a real OVN-Kubernetes cluster.
const (
	// ClusterRouter is the distributed router every node switch hangs off.
	ClusterRouter = "ovn_cluster_router"
	// ControllerName is the owner-controller of every row this controller owns.
	ControllerName = "default-network-controller"

	// NodeSubnetsAnnotation carries a node's pod subnet, written by the lab.
	NodeSubnetsAnnotation = "k8s.ovn.org/node-subnets"
	// PodNetworksAnnotation carries a pod's address, read by the lab's CNI.
	PodNetworksAnnotation = "k8s.ovn.org/pod-networks"

	keyOwnerController = "k8s.ovn.org/owner-controller"
	keyOwnerType       = "k8s.ovn.org/owner-type"
	keyName            = "k8s.ovn.org/name"
	keyID              = "k8s.ovn.org/id"
	keyLBKind          = "k8s.ovn.org/kind"
	keyLBOwner         = "k8s.ovn.org/owner"

	ownerNetworkPolicy  = "NetworkPolicy"
	ownerNetpolNS       = "NetpolNamespace"
	ownerNetpolDefault  = "NetpolDefault"
	ownerNetpolNode     = "NetpolNode"
	ownerPodSelector    = "PodSelector"
	ownerCluster        = "Cluster"
	ownerNodeEgress     = "NodeEgress"
	clusterPortGroupKey = "clusterPortGroup"

	// Priorities of types.DefaultAllowPriority and types.DefaultDenyPriority.
	allowPriority = 1001
	denyPriority  = 1000
)

// RouterToSwitch names the router port facing NODE's switch.
func RouterToSwitch(node string) string { return "rtos-" + node }

// SwitchToRouter names the switch port facing the cluster router.
func SwitchToRouter(node string) string { return "stor-" + node }

// ManagementPort names NODE's management port (bound to ovn-k8s-mp0).
func ManagementPort(node string) string { return "k8s-" + node }

// PodPort names a pod's logical switch port, as util.GetLogicalPortName does.
func PodPort(namespace, name string) string { return namespace + "_" + name }

// MAC is OVN-Kubernetes' MAC for an IPv4 address: 0a:58 and the four bytes.
func MAC(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

// HashForOVN is util.HashForOVN: "a" and the 64-bit FNV-1a of s in decimal.
// Port group and address set names are such hashes of the row's primary id.
func HashForOVN(s string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return "a" + strconv.FormatUint(h.Sum64(), 10)
}

// dbIDs is OVN-Kubernetes' DbObjectIDs: an owner type, its ordered keys and
// their values. Its external_ids carry the owner and every key, and the
// primary id "CONTROLLER:OWNERTYPE:VALUE1:VALUE2..." in key order.
type dbIDs struct {
	ownerType string
	keys      []string
	values    map[string]string
}

func newIDs(ownerType string, kv ...string) dbIDs {
	ids := dbIDs{ownerType: ownerType, values: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		ids.keys = append(ids.keys, kv[i])
		ids.values[kv[i]] = kv[i+1]
	}
	return ids
}

func (ids dbIDs) primaryID() string {
	id := ControllerName + ":" + ids.ownerType
	for _, k := range ids.keys {
		id += ":" + ids.values[k]
	}
	return id
}

func (ids dbIDs) externalIDs() map[string]string {
	m := map[string]string{keyOwnerController: ControllerName, keyOwnerType: ids.ownerType, keyID: ids.primaryID()}
	for k, v := range ids.values {
		m[k] = v
	}
	return m
}

// hashName is the port group or address set name of these ids.
func (ids dbIDs) hashName() string { return HashForOVN(ids.primaryID()) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func joinSorted(s []string, sep string) string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return strings.Join(c, sep)
}
