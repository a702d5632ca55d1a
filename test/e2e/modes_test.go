//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The lab's modes (TFLAB_CNI): which dataplane the cluster runs.
const (
	// modeLab is the lab's own CNI and agent with an Antrea-like pipeline.
	modeLab = "lab"
	// modeOVN is real OVN, shaped as OVN-Kubernetes shapes it.
	modeOVN = "ovn"
	// modeAntrea is the real Antrea v2.3.2 (issue 12).
	modeAntrea = "antrea"
	// modeOVNK is the genuine OVN-Kubernetes (issue 22).
	modeOVNK = "ovnk"
)

// labModeRow is one row of labModes: a lab mode and what the suite needs to
// know of it, where the modes differ.
type labModeRow struct {
	name string
	// prebuild is a script in test/lab that TestMain runs before lab.sh up
	// (a cold build is not part of the measured lab-up time), or "", and
	// what it builds, for its error.
	prebuild, prebuilds string
	// hairpinSrc is where a pod reaching itself through a Service sees the
	// connection come from.
	hairpinSrc string
	// nodeSrc is where a node's own traffic to its pods (kubelet probes)
	// comes from, or "" in a mode no such test holds in.
	nodeSrc string
	// subnetAnnotation is the Node annotation holding the node's subnet as
	// {"default":[CIDR]}, where the mode keeps it there and not in
	// spec.podCIDR.
	subnetAnnotation string
	// allocatesSubnets: the mode's controller gives each node a subnet of
	// the pod range in its own order (the order the nodes registered), not
	// node N 10.244.N.0/24: tests read it (nodeSubnet).
	allocatesSubnets bool
	// interconnect: OVN-Kubernetes' interconnect layout, each node a zone
	// of its own, reached from the others through the transit switch
	// transit_switch.
	interconnect bool
}

// labModes is the one table of the lab's modes (TFLAB_CNI): one row per
// mode file test/lab/modes/NN-MODE.sh, in their order
// (TestEveryLabModeHasARow, in the unit suite, holds it to them).
var labModes = []labModeRow{
	// The lab agent's gateway antrea-gw0 holds .1; its hairpin SNAT address
	// is the lab's own.
	{name: modeLab, hairpinSrc: "169.254.0.253", nodeSrc: "10.244.1.1"},
	// As OVN-Kubernetes: the management port ovn-k8s-mp0 holds .2, the
	// hairpin masquerade address is V4OVNServiceHairpinMasqueradeIP, and the
	// subnet is the annotation its controller allocates from. Its nodes run
	// the ovn-kubernetes fixture's Open vSwitch 4.0, unpacked once.
	{name: modeOVN, prebuild: "build-ovs-root.sh", prebuilds: "the fixture's Open vSwitch", hairpinSrc: "169.254.169.5", nodeSrc: "10.244.1.2", subnetAnnotation: "k8s.ovn.org/node-subnets"},
	// Antrea's own build, from the fixtures' source tarball (a missing one
	// fails there); its hairpin SNAT is to the gateway.
	{name: modeAntrea, prebuild: "build-antrea.sh", prebuilds: "Antrea", hairpinSrc: "10.244.1.1"},
	// The genuine OVN-Kubernetes, built from the fixture's source: the
	// hairpin masquerade address OVN mode mimics, and the subnets its
	// cluster manager allocates. No test of the node's own source address
	// holds here yet (its management port is .2 of a subnet it chose).
	{name: modeOVNK, prebuild: "build-ovnk.sh", prebuilds: "OVN-Kubernetes", hairpinSrc: "169.254.169.5", subnetAnnotation: "k8s.ovn.org/node-subnets", allocatesSubnets: true, interconnect: true},
}

// modeRow is labModes' row for mode (the zero row for a mode it lacks).
func modeRow(mode string) labModeRow {
	for _, r := range labModes {
		if r.name == mode {
			return r
		}
	}
	return labModeRow{}
}

func modeNames(rows []labModeRow) []string {
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
	}
	return names
}

var (
	everyMode = modeNames(labModes)
	// labAndOVN: tests not (yet) shown to hold on the real Antrea.
	labAndOVN = []string{modeLab, modeOVN}
	labOnly   = []string{modeLab}
)

// holdsIn says, for every e2e test, the lab modes it holds in. A run in one
// mode runs exactly the tests that hold in it (TestMain narrows -run), so
// that no test is skipped for being in the wrong mode: a skip would hide a
// test that silently stopped running. A test missing here fails
// TestEveryTestDeclaresItsModes.
//
// Helper-mode traces whose assertions are the dataplane's, not the lab
// pipeline's, hold in both modes (issue 13); the lab's own named tables,
// reject and gateway-route annotations exist only in lab mode.
var holdsIn = map[string][]string{
	// The cluster and the lab.
	"TestLabUpWarmAndIdempotent":               everyMode,
	"TestTwoReadyNodes":                        everyMode,
	"TestImagesOnEveryNode":                    everyMode,
	"TestPluginRunsThroughKubectl":             everyMode,
	"TestWatchWithoutResourceVersionStaysOpen": everyMode,
	"TestCompletionThroughKubectl":             everyMode,
	"TestTraceWithShortRequestTimeout":         everyMode,
	"TestZZLabDownLeavesNothing":               everyMode,
	"TestEveryTestDeclaresItsModes":            everyMode,
	// The lab's Antrea mode (issue 12).
	"TestAntreaAgentsHealthyAndAPIServicesAvailable": antreaOnly,
	"TestAntreaTraceflowByKubectlCreate":             antreaOnly,
	// Agent mode against the real Antrea (issue 12, done-when 3).
	"TestAntreaAutoPicksAgent":    antreaOnly,
	"TestAntreaDelivered":         antreaOnly,
	"TestAntreaService":           antreaOnly,
	"TestAntreaK8sPolicyDrop":     antreaOnly,
	"TestAntreaNativePolicies":    antreaOnly,
	"TestAntreaOtherDestinations": antreaOnly,
	"TestAntreaLive":              antreaOnly,
	// Agent mode says what helper mode says (issue 25).
	"TestAntreaAutoNamesDefaultDeny":                       antreaOnly,
	"TestAntreaAutoServiceWithoutEndpoints":                antreaOnly,
	"TestAntreaCheckWrongExpectationNamesPolicy":           antreaOnly,
	"TestAntreaAutoRetriesWithHelperWhenAgentsReportNoEnd": antreaOnly,
	// Helper mode next to Antrea (issue 14, done-when 3).
	"TestAntreaHelperNextToAntreaTrace":     antreaOnly,
	"TestAntreaHelperWithControllerStopped": antreaOnly,
	// Helper mode on the real Antrea (issue 14).
	"TestAntreaHelperClusterNetworkPolicy": antreaOnly,
	// Helper mode against Antrea's own Traceflow (issue 14, done-when 1).
	"TestAntreaHelperAgreesWithAgent": antreaOnly,
	// The network, with real traffic.
	"TestTrafficWithinAndAcrossNodes":          everyMode,
	"TestTrafficHairpinThroughService":         everyMode,
	"TestPodsGetIPsOnBothNodes":                everyMode,
	"TestCrossNodeTCP":                         everyMode,
	"TestClusterIPServiceReachesBothNodes":     everyMode,
	"TestNetworkPolicyIngressDeny":             everyMode,
	"TestNetworkPolicyEgressNamespaceSelector": everyMode,
	"TestKubectlLogsFollow":                    everyMode,
	// On the real Antrea the probes fail under a deny-all ingress policy
	// (seen 2026-11-30; the node's traffic is not exempted there as the lab
	// agent exempts it): not yet understood.
	"TestKubeletProbesReachPods":   labAndOVN,
	"TestHostNetworkPodSeesOwnOVS": everyMode,
	// The lab's OVN mode.
	"TestOVNChassisAndFlows":         ovnOnly,
	"TestOVNPolicyDropSeenByDetrace": ovnOnly,
	// Helper-mode traces in OVN's words (issue 13).
	"TestTraceOVNAcrossNodesNamed": ovnModes,
	"TestTraceOVNSameNodeNamed":    ovnModes,
	"TestTraceOVNPolicyDrops":      ovnModes,
	"TestTraceOVNServiceBothNodes": ovnModes,
	// On the genuine OVN-Kubernetes an address of the cluster's range that
	// no node holds is routed to the gateway router, SNATed to the node
	// and routed back to the cluster router, which drops it there (its
	// datapath flows say so); the helper loses the probe after the SNAT
	// and says Incomplete. Not yet understood: the lab's OVN only.
	"TestTraceOVNNoRoute":          ovnOnly,
	"TestTraceOVNUndisturbed":      ovnModes,
	"TestTraceOVNWithoutDatabases": ovnModes,
	// The genuine OVN-Kubernetes' policy kinds (issue 22).
	"TestOVNKPoliciesNamed": ovnkOnly,
	// A node's own traffic and a pod's leaving the pod network, on the
	// genuine topology (gateway routers, management ports).
	"TestOVNKNodeAndOutside": ovnkOnly,
	// Round trips (issue 26).
	"TestNodeAndHostNetworkSources":           everyMode,
	"TestRoundTrip":                           everyMode,
	"TestRoundTripLeavesRealConnectionsAlone": everyMode,
	// Round trips from one pod at once on shared helpers: no trace takes
	// another's answer.
	"TestCheckRoundTripsFromOneSource": everyMode,
	// Out of the pod network: masqueraded by the node's kernel (Antrea;
	// the lab mode, which egresses through antrea-gw0 as Antrea does; the
	// ovn mode, through the management port as OVN-Kubernetes' local
	// gateway mode does), or SNATed in OVS (the genuine OVN-Kubernetes'
	// gateway router).
	"TestRoundTripOutside": everyMode,
	// From outside the cluster (issue 26): only the genuine
	// OVN-Kubernetes implements NodePorts and externalIPs in OVS (its
	// gateway routers and breth0's flows); the lab's and ovn modes have no
	// uplink bridge, and the antrea mode runs no kube-proxy and Antrea's
	// proxy without proxyAll, so nothing there answers a NodePort. The
	// refusals are the plugin's, in every mode.
	"TestOutsideToNodePortAndExternalIP":    {modeAntrea, modeOVNK},
	"TestOutsideLeavesRealConnectionsAlone": {modeAntrea, modeOVNK},
	"TestOutsideBadInput":                   everyMode,
	"TestOutsideWhereNoUplinkBridge":        {modeLab, modeOVN},
	// A way back that drops the answer: the lab agent's drop-replies fault,
	// a logical router policy in the OVN modes, a drop flow of the test's
	// own on Antrea (issue 26).
	"TestRoundTripAnswerLostOnTheWayBack": everyMode,
	// A source port conntrack moves (a DNAT meeting a closing connection).
	"TestRoundTripFromOnePortTwice": everyMode,
	// The lab's own pipeline.
	"TestTableNamesInTableFeatures": labOnly,
	// Traces.
	"TestAgentModeWithAntreaDouble": labOnly,
	// Its own etcd and API server, whatever the lab runs: once is enough.
	"TestAgentModeReplayedWithoutEtcdProgressNotify": labOnly,
	"TestLiveViewInTmux":                             labOnly,
	// Helper-mode traces, in every mode: in the Antrea lab they run with
	// --engine helper (withEngine), where auto would pick Antrea's agents.
	"TestTraceIntraNodeDelivered":       everyMode,
	"TestTraceInterNodeDelivered":       everyMode,
	"TestTraceServiceLoadBalanced":      everyMode,
	"TestTraceNetworkPolicyDrop":        everyMode,
	"TestTraceMissingPodCreatesNothing": everyMode,
	"TestTraceNodeWithoutOVS":           everyMode,
	"TestTraceEightConcurrent":          everyMode,
	"TestTraceInterruptRemovesHelpers":  everyMode,
	"TestTraceKilledThenCleanup":        everyMode,
	"TestTraceHairpinThroughService":    everyMode,
	"TestTraceThroughGateway":           labOnly,
	"TestTraceRejectAndDrop":            labOnly,
	"TestTraceRepeatable":               everyMode,
	// Least privilege (issue 15).
	"TestTraceAsUserBoundByInstall":      labOnly,
	"TestTraceHelperNamespaceKubeSystem": labOnly,
	"TestHelperResourceUse":              labOnly,
	// Suites of traces (kubectl traceflow check).
	"TestCheckSuitePasses":             labOnly,
	"TestCheckWrongExpectationFails":   labOnly,
	"TestCheckBadSuitesCreateNothing":  labOnly,
	"TestCheckInterruptLeavesNothing":  labOnly,
	"TestCheckSecondInterruptCleansUp": labOnly,
	"TestTraceAllEndpoints":            labOnly,
	// The connectivity matrix (issue 27).
	"TestMatrixAgreesWithRealTraffic":        everyMode,
	"TestMatricesAtOnceAgreeWithRealTraffic": labOnly,
	"TestMatrixExpectedFile":                 labOnly,
	"TestMatrixInterruptLeavesNothing":       labOnly,
	"TestTraceSecondInterruptExitsAtOnce":    everyMode,
	// The fault campaign (issue 15).
	"TestFaultCleanupWhileAnotherTraceRuns": labOnly,
	"TestFaultRBACVerbMissing":              labOnly,
	"TestFaultAPIServerRestarted":           labOnly,
	"TestFaultOVSRestartedOnReceiver":       labOnly,
	"TestFaultKubeletStoppedOnReceiver":     labOnly,
	"TestFaultHelperImageMissingOnOneNode":  labOnly,
	"TestFaultTagPoolPlusFive":              labOnly,
}

// labMode is the mode this run brings the lab up in.
func labMode() string {
	if m := os.Getenv("TFLAB_CNI"); m != "" {
		return m
	}
	return modeLab
}

// selectTests narrows -test.run to the tests that hold in the lab's mode,
// keeping what the caller asked for: -run A|B keeps only A and B among
// them, and a pattern's subtest part (after the first '/') is kept as it is.
func selectTests() error {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.run")
	if f == nil {
		return nil
	}
	mode := labMode()
	if !slices.Contains(everyMode, mode) {
		return fmt.Errorf("TFLAB_CNI=%s: the e2e tests know the modes %v", mode, everyMode)
	}
	top, sub, hasSub := strings.Cut(f.Value.String(), "/")
	var want *regexp.Regexp
	if top != "" {
		re, err := regexp.Compile(top)
		if err != nil {
			return fmt.Errorf("-run %q: %w", f.Value.String(), err)
		}
		want = re
	}
	var names []string
	for name, modes := range holdsIn {
		if slices.Contains(modes, mode) && (want == nil || want.MatchString(name)) {
			names = append(names, regexp.QuoteMeta(name))
		}
	}
	sort.Strings(names)
	pattern := "^$"
	if len(names) > 0 {
		pattern = "^(" + strings.Join(names, "|") + ")$"
	}
	if hasSub {
		pattern += "/" + sub
	}
	return f.Value.Set(pattern)
}

// Every test of this package says where it holds: a test missing from
// holdsIn would run in no mode at all.
func TestEveryTestDeclaresItsModes(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	e2eBuild := build.Default
	e2eBuild.BuildTags = []string{"e2e"}
	for _, file := range files {
		// Only the files of the e2e build: inventory_test.go is the unit
		// suite's reading of this one.
		if ok, err := e2eBuild.MatchFile(".", file); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			declared[fn.Name.Name] = true
			if len(holdsIn[fn.Name.Name]) == 0 {
				t.Errorf("%s (%s) declares no lab mode: add it to holdsIn", fn.Name.Name, file)
			}
		}
	}
	for name := range holdsIn {
		if !declared[name] {
			t.Errorf("holdsIn names %s, which is no test of this package", name)
		}
	}
}
