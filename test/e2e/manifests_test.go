//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The objects the e2e tests make, as manifests for apply: one builder per
// shape the suite repeats (a workload pod on a node, a Service over pods, a
// NetworkPolicy, the Antrea-native policies two suites share). Each returns
// one YAML document ending in "---", so that a test concatenates what it
// needs. Pure: no cluster, no clock.

// podSpec is a workload pod pinned to a node.
func podSpec(ns, name, node string, labels map[string]string, args ...string) string {
	var l []string
	for k, v := range labels {
		l = append(l, fmt.Sprintf("%s: %q", k, v))
	}
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {%s}}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: workload
    image: %s
    imagePullPolicy: Never
    args: %s
    env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
---
`, name, ns, strings.Join(l, ", "), node, workloadImage, a)
}

// svcPort is one port of a Service; an empty name or protocol is left out
// (the API's defaults: no name, TCP).
type svcPort struct {
	name         string
	port, target int
	protocol     string
}

// http80 is the port most of the suite's Services serve: the workload's
// HTTP server.
var http80 = svcPort{name: "http", port: 80, target: 80}

func (p svcPort) yaml() string {
	var f []string
	if p.name != "" {
		f = append(f, "name: "+p.name)
	}
	f = append(f, fmt.Sprintf("port: %d", p.port), fmt.Sprintf("targetPort: %d", p.target))
	if p.protocol != "" {
		f = append(f, "protocol: "+p.protocol)
	}
	return "{" + strings.Join(f, ", ") + "}"
}

// serviceSpec is a ClusterIP Service over the pods labelled app=app.
func serviceSpec(ns, name, app string, ports ...svcPort) string {
	var ps []string
	for _, p := range ports {
		ps = append(ps, p.yaml())
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  selector: {app: %s}
  ports: [%s]
---
`, name, ns, app, strings.Join(ps, ", "))
}

// netpol is a Kubernetes NetworkPolicy over the pods labelled app=app (every
// pod of the namespace when app is empty). policyTypes is written only when
// types is given (the API then derives it from the rules); each rule is one
// YAML flow mapping ("{}" allows all).
type netpol struct {
	ns, name, app   string
	types           []string
	ingress, egress []string
	// annotation is one "key": value pair for metadata.annotations.
	annotation string
}

func (p netpol) yaml() string {
	var b strings.Builder
	b.WriteString("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n")
	if p.annotation != "" {
		fmt.Fprintf(&b, "metadata: {name: %s, namespace: %s, annotations: {%s}}\n", p.name, p.ns, p.annotation)
	} else {
		fmt.Fprintf(&b, "metadata: {name: %s, namespace: %s}\n", p.name, p.ns)
	}
	b.WriteString("spec:\n")
	if p.app == "" {
		b.WriteString("  podSelector: {}\n")
	} else {
		fmt.Fprintf(&b, "  podSelector: {matchLabels: {app: %s}}\n", p.app)
	}
	if len(p.types) > 0 {
		fmt.Fprintf(&b, "  policyTypes: [%s]\n", strings.Join(p.types, ", "))
	}
	for _, dir := range []struct {
		key   string
		rules []string
	}{{"ingress", p.ingress}, {"egress", p.egress}} {
		if len(dir.rules) == 0 {
			continue
		}
		fmt.Fprintf(&b, "  %s:\n", dir.key)
		for _, r := range dir.rules {
			fmt.Fprintf(&b, "  - %s\n", r)
		}
	}
	b.WriteString("---\n")
	return b.String()
}

// denyIngress is a default deny of all ingress to the pods labelled app=app
// (every pod when app is empty).
func denyIngress(ns, name, app string) string {
	return netpol{ns: ns, name: name, app: app, types: []string{"Ingress"}}.yaml()
}

// denyEgress is a default deny of all egress from the pods labelled app=app.
func denyEgress(ns, name, app string) string {
	return netpol{ns: ns, name: name, app: app, types: []string{"Egress"}}.yaml()
}

// tcpRule is a policy rule: TCP to port from (or to) peers, a flow list of
// NetworkPolicyPeers ("" for any peer).
func tcpRule(peers string, port int) string {
	ports := fmt.Sprintf("ports: [{protocol: TCP, port: %d}]", port)
	if peers == "" {
		return "{" + ports + "}"
	}
	return "{" + peers + ", " + ports + "}"
}

// antreaDropToPeer is the Antrea ClusterNetworkPolicy two suites trace: it
// drops TCP 8080 from app=client to app=peer, both in ns, in its rule
// drop-8080.
func antreaDropToPeer(name, ns string) string {
	return fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: %[1]s}
spec:
  priority: 5
  tier: application
  appliedTo:
  - podSelector: {matchLabels: {app: peer}}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[2]s}}
  ingress:
  - name: drop-8080
    action: Drop
    from:
    - podSelector: {matchLabels: {app: client}}
      namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[2]s}}
    ports: [{protocol: TCP, port: 8080}]
---
`, name, ns)
}

// antreaRejectToWeb is the Antrea NetworkPolicy reject-web: it rejects TCP
// 8080 from app=client to app=web in its rule reject-8080.
func antreaRejectToWeb(ns string) string {
	return fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: NetworkPolicy
metadata: {name: reject-web, namespace: %s}
spec:
  priority: 5
  tier: application
  appliedTo:
  - podSelector: {matchLabels: {app: web}}
  ingress:
  - name: reject-8080
    action: Reject
    from:
    - podSelector: {matchLabels: {app: client}}
    ports: [{protocol: TCP, port: 8080}]
---
`, ns)
}
