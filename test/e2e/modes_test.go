//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"go/ast"
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
)

var (
	everyMode = []string{modeLab, modeOVN, modeAntrea}
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
	"TestTraceOVNAcrossNodesNamed": ovnOnly,
	"TestTraceOVNSameNodeNamed":    ovnOnly,
	"TestTraceOVNPolicyDrops":      ovnOnly,
	"TestTraceOVNServiceBothNodes": ovnOnly,
	"TestTraceOVNNoRoute":          ovnOnly,
	"TestTraceOVNUndisturbed":      ovnOnly,
	"TestTraceOVNWithoutDatabases": ovnOnly,
	// The lab's own pipeline.
	"TestTableNamesInTableFeatures": labOnly,
	// Traces.
	"TestAgentModeWithAntreaDouble": labOnly,
	// Its own etcd and API server, whatever the lab runs: once is enough.
	"TestAgentModeWithoutEtcdProgressNotify": labOnly,
	"TestLiveViewInTmux":                     labOnly,
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
	"TestCheckSuitePasses":                labOnly,
	"TestCheckWrongExpectationFails":      labOnly,
	"TestCheckBadSuitesCreateNothing":     labOnly,
	"TestCheckInterruptLeavesNothing":     labOnly,
	"TestCheckSecondInterruptCleansUp":    labOnly,
	"TestTraceAllEndpoints":               labOnly,
	"TestTraceSecondInterruptExitsAtOnce": everyMode,
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
	for _, file := range files {
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
