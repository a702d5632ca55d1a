package ovnk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
)

// Controller watches Nodes, Pods, Namespaces, Services, EndpointSlices and
// NetworkPolicies and keeps the NB database in step, level-triggered: every
// change recomputes the whole desired state (a lab has tens of objects), and
// Apply writes the difference.
type Controller struct {
	cs      kubernetes.Interface
	nb      client.Client
	hairpin string
	// outside are the networks pods reach through their node
	// (EgressPolicies); set by ReachOutside before Run.
	outside []netip.Prefix
	logf    func(string, ...any)
	ipam    *IPAM
	kick    chan struct{}

	factory informers.SharedInformerFactory
	nodes   corelisters.NodeLister
	pods    corelisters.PodLister
	nss     corelisters.NamespaceLister
	svcs    corelisters.ServiceLister
	slices  discoverylisters.EndpointSliceLister
	nps     networkinglisters.NetworkPolicyLister
}

// ReachOutside lets pods reach the networks outside through their node's
// management port (EgressPolicies). Call it before Run.
func (c *Controller) ReachOutside(outside []netip.Prefix) { c.outside = outside }

// NewController wires the informers; nb must monitor NBModel's tables.
// hairpinSNATIP is the load balancers' hairpin_snat_ip (HairpinSNATIP as
// OVN-Kubernetes, "" for OVN's default, the VIP).
func NewController(cs kubernetes.Interface, nb client.Client, hairpinSNATIP string, logger *log.Logger) (*Controller, error) {
	f := informers.NewSharedInformerFactory(cs, 0)
	c := &Controller{
		cs: cs, nb: nb, hairpin: hairpinSNATIP, logf: logger.Printf, ipam: NewIPAM(), kick: make(chan struct{}, 1),
		factory: f, nodes: f.Core().V1().Nodes().Lister(), pods: f.Core().V1().Pods().Lister(),
		nss: f.Core().V1().Namespaces().Lister(), svcs: f.Core().V1().Services().Lister(),
		slices: f.Discovery().V1().EndpointSlices().Lister(), nps: f.Networking().V1().NetworkPolicies().Lister(),
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.trigger() }, UpdateFunc: func(any, any) { c.trigger() }, DeleteFunc: func(any) { c.trigger() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		f.Core().V1().Nodes().Informer(), f.Core().V1().Pods().Informer(), f.Core().V1().Namespaces().Informer(),
		f.Core().V1().Services().Informer(), f.Discovery().V1().EndpointSlices().Informer(),
		f.Networking().V1().NetworkPolicies().Informer(),
	} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, fmt.Errorf("watch the cluster: %w", err)
		}
	}
	return c, nil
}

func (c *Controller) trigger() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run syncs on every change until ctx ends, retrying a failed sync after a
// second and resyncing every 30 s (which also repairs hand edits of the NB).
func (c *Controller) Run(ctx context.Context) error {
	c.factory.Start(ctx.Done())
	for typ, ok := range c.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	c.trigger()
	resync := time.NewTicker(30 * time.Second)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			c.factory.Shutdown()
			return nil
		case <-resync.C:
		case <-c.kick:
		}
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.logf("sync failed, retrying in 1s: %v", err)
			time.AfterFunc(time.Second, c.trigger)
		}
	}
}

// Sync assigns addresses, writes the NB and then the pod annotations, so that
// a pod's annotation means its port exists.
func (c *Controller) Sync(ctx context.Context) error {
	in, annotate, err := c.input()
	if err != nil {
		return err
	}
	n, err := Apply(ctx, c.nb, Build(in))
	if err != nil {
		return err
	}
	if n > 0 {
		c.logf("NB: %d operations (%d nodes, %d pods, %d services, %d policies)", n, len(in.Nodes), len(in.Pods), len(in.Services), len(in.Policies))
	}
	var errs []error
	for _, a := range annotate {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{PodNetworksAnnotation: a.value}}})
		_, err := c.cs.CoreV1().Pods(a.namespace).Patch(ctx, a.name, types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case apierrors.IsNotFound(err): // deleted meanwhile: the next sync drops its port
		case err != nil:
			errs = append(errs, fmt.Errorf("annotate pod %s/%s: %w", a.namespace, a.name, err))
		default:
			c.logf("pod %s/%s: %s", a.namespace, a.name, a.value)
		}
	}
	return errors.Join(errs...)
}

type annotation struct{ namespace, name, value string }

// input reads the listers into an Input, assigning pod addresses: first to
// pods that already have one (annotation, or their port after a crash between
// the two writes), then to new pods, so that a restart renumbers nobody.
func (c *Controller) input() (Input, []annotation, error) {
	in := Input{Namespaces: map[string]map[string]string{}, Slices: map[string][]*discoveryv1.EndpointSlice{}, HairpinSNATIP: c.hairpin, Outside: c.outside}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return in, nil, fmt.Errorf("list nodes: %w", err)
	}
	subnets := map[string]netip.Prefix{}
	for _, n := range nodes {
		a, ok := n.Annotations[NodeSubnetsAnnotation]
		if !ok {
			continue // the lab has not written it yet
		}
		s, err := NodeSubnet(a)
		if err != nil {
			c.logf("node %s: %v", n.Name, err)
			continue
		}
		subnets[n.Name] = s
		c.ipam.SetSubnet(n.Name, s)
		in.Nodes = append(in.Nodes, Node{Name: n.Name, Subnet: s})
	}
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return in, nil, fmt.Errorf("list pods: %w", err)
	}
	lspIPs := c.lspIPs()
	var live []*corev1.Pod
	for _, p := range pods {
		if _, ok := subnets[p.Spec.NodeName]; ok && !p.Spec.HostNetwork &&
			p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	// Deterministic: first come, first served, then by name.
	sort.SliceStable(live, func(i, j int) bool {
		ti, tj := live[i].CreationTimestamp, live[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return live[i].Namespace+"/"+live[i].Name < live[j].Namespace+"/"+live[j].Name
	})
	keep := map[string]bool{}
	ips := map[string]netip.Addr{}
	for pass := 0; pass < 2; pass++ {
		for _, p := range live {
			key := p.Namespace + "/" + p.Name
			want := PodIP(p.Annotations[PodNetworksAnnotation])
			if !want.IsValid() {
				want = lspIPs[PodPort(p.Namespace, p.Name)]
			}
			if (pass == 0) != want.IsValid() {
				continue
			}
			ip, err := c.ipam.Assign(key, p.Spec.NodeName, want)
			if err != nil {
				c.logf("pod %s: %v", key, err)
				continue
			}
			keep[key], ips[key] = true, ip
		}
	}
	for _, owner := range c.ipam.Owners() {
		if !keep[owner] {
			c.ipam.Release(owner)
		}
	}
	var annotate []annotation
	for _, p := range live {
		ip, ok := ips[p.Namespace+"/"+p.Name]
		if !ok {
			continue
		}
		in.Pods = append(in.Pods, Pod{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, UID: string(p.UID), Labels: p.Labels, IP: ip})
		if v := PodNetworks(ip, subnets[p.Spec.NodeName]); p.Annotations[PodNetworksAnnotation] != v {
			annotate = append(annotate, annotation{p.Namespace, p.Name, v})
		}
	}
	return c.clusterObjects(in, annotate)
}

func (c *Controller) clusterObjects(in Input, annotate []annotation) (Input, []annotation, error) {
	nss, err := c.nss.List(labels.Everything())
	if err != nil {
		return in, nil, fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss {
		in.Namespaces[ns.Name] = ns.Labels
	}
	if in.Services, err = c.svcs.List(labels.Everything()); err != nil {
		return in, nil, fmt.Errorf("list services: %w", err)
	}
	slices, err := c.slices.List(labels.Everything())
	if err != nil {
		return in, nil, fmt.Errorf("list endpoint slices: %w", err)
	}
	for _, s := range slices {
		if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
			in.Slices[s.Namespace+"/"+svc] = append(in.Slices[s.Namespace+"/"+svc], s)
		}
	}
	if in.Policies, err = c.nps.List(labels.Everything()); err != nil {
		return in, nil, fmt.Errorf("list network policies: %w", err)
	}
	return in, annotate, nil
}

// lspIPs: the address of every pod port in the NB cache, by port name.
func (c *Controller) lspIPs() map[string]netip.Addr {
	var lsps []LogicalSwitchPort
	out := map[string]netip.Addr{}
	if err := c.nb.List(context.Background(), &lsps); err != nil {
		return out
	}
	for _, l := range lsps {
		if l.ExternalIDs["pod"] != "true" || len(l.Addresses) == 0 {
			continue
		}
		if f := strings.Fields(l.Addresses[0]); len(f) == 2 {
			if ip, err := netip.ParseAddr(f[1]); err == nil {
				out[l.Name] = ip
			}
		}
	}
	return out
}
