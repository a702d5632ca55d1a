package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/matrix"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// The matrix's own output formats beside the live grid and plain text.
const (
	// outputExpected writes the run as an expected-matrix file.
	outputExpected = "expected"
)

// MatrixOptions is `kubectl traceflow matrix`.
type MatrixOptions struct {
	genericiooptions.IOStreams
	// run holds how the cells run (engine, concurrency, timeout, JUnit,
	// colour): the flags check has too.
	run *CheckOptions

	// Flag values.
	selector   string
	ports      []string
	expectFile string
	roundTrip  bool
	output     string

	// Typed inputs, set by Complete.
	portList []matrix.Port
	expected *matrix.Expected
	format   string
}

func newMatrixCommand(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &MatrixOptions{IOStreams: streams, run: newCheckOptions(streams, deps, cf), roundTrip: true}
	cmd := &cobra.Command{
		Use:   "matrix [-n NAMESPACE] [-l SELECTOR]",
		Short: "Trace every pod to every other pod of a namespace, on every port they serve: a grid, every red cell explained",
		Long: `Trace from every Ready pod of the namespace (or of -l SELECTOR) to every
other one, on every port: the ports the pods' containers declare and the
ports of the NetworkPolicies that select them, or those given with --port.
Each cell is a real probe through the dataplane, as
'kubectl traceflow SRC DST' sends it; the cells run on shared helpers,
concurrently within the tag pool.

The grid fills in live on a terminal: ✓ answered (delivered, and the
answer came back), ✗ dropped (or the answer lost), ↩ refused (a RST, an
ICMP error, a policy's reject), ? incomplete. Every cell that is not ✓ is
explained below it: the node, the OVS table and flow, the NetworkPolicy
rule. With --round-trip=false a cell follows the probe only, and ✓ means
delivered.

-o expected writes the run as an expected-matrix file (kind
ConnectivityMatrix; pkg/plugin/matrix/matrix.schema.json in the repository
documents it); --expect-file compares a run with one: exit 2 when a cell
differs, naming the cell, what the file said and the hop that decided it.

Exit codes: 0 every cell as expected (or no file given and every cell
completed), 1 bad input (nothing created), 2 a cell differs from the file,
3 a cell did not complete, 4 setup failure; as check, 4 before 3 before 2.`,
		Example: `  # The grid of namespace demo, on the ports its pods serve
  kubectl traceflow matrix -n demo

  # Record what the namespace does today, then fail CI when it changes
  kubectl traceflow matrix -n demo -o expected > demo-matrix.yaml
  kubectl traceflow matrix -n demo --expect-file demo-matrix.yaml --junit matrix.xml

  # Only the web tier, on TCP 80 and 443
  kubectl traceflow matrix -n demo -l tier=web --port tcp/80 --port tcp/443`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.selector, "selector", "l", "", "label selector of the pods, sources and destinations alike (default: every pod of the namespace)")
	f.StringArrayVar(&o.ports, "port", nil, "a destination port: tcp/80, udp/53, icmp or 80 (TCP); may be repeated (default: the pods' container ports and their policies' ports)")
	f.StringVar(&o.expectFile, "expect-file", "", "compare the run with an expected-matrix FILE (as -o expected writes it): exit 2 on a difference")
	f.BoolVar(&o.roundTrip, "round-trip", o.roundTrip, "follow each cell's answer back, so that a cell says what a client sees (answered, refused); false follows the probe only")
	f.VarP(&enumValue{&o.output, []string{outputPlain, outputJSON, outputExpected}}, "output", "o",
		"output format (default: a live grid on a terminal, the grid at the end otherwise); json writes one object per cell, expected an expected-matrix file")
	o.run.addRunFlags(f)
	return cmd
}

// Complete parses the ports and reads the expected-matrix file. It reads
// no kubeconfig.
func (o *MatrixOptions) Complete() error {
	if _, err := labels.Parse(o.selector); err != nil {
		return exitcode.UsageErrorf("-l %q: %w: give a label selector as kubectl get -l takes it (app=web, tier in (web,api))", o.selector, err)
	}
	for _, s := range o.ports {
		p, err := matrix.ParsePort(s)
		if err != nil {
			return exitcode.UsageErrorf("--port %q: %w", s, err)
		}
		o.portList = append(o.portList, p)
	}
	if o.expectFile != "" {
		data, err := os.ReadFile(o.expectFile)
		if err != nil {
			return exitcode.UsageErrorf("--expect-file: %w", err)
		}
		if o.expected, err = matrix.ParseExpected(o.expectFile, data); err != nil {
			return exitcode.Wrap(exitcode.Usage, err)
		}
	}
	terminal := o.run.deps.IsTerminal(o.Out)
	o.format = o.output
	if o.format == "" {
		o.format = outputPlain
		if terminal {
			o.format = outputLive
		}
	}
	o.run.useColor = colorEnabled(o.run.color, terminal, o.run.deps.Getenv)
	return nil
}

// Validate checks the flags, still without a cluster.
func (o *MatrixOptions) Validate() error {
	if err := o.run.Validate(); err != nil {
		return err
	}
	if o.run.engine == "agent" && o.roundTrip {
		return exitcode.UsageErrorf("--engine agent: Antrea's Traceflow follows the probe one way only: add --round-trip=false, or use --engine helper (or auto)")
	}
	return nil
}

// Run lists the pods and their ports, resolves every cell, compares the
// expected file's pods with the cluster's before anything is created,
// then runs the cells and reports.
func (o *MatrixOptions) Run(ctx context.Context) error {
	clients, err := o.run.deps.Connect(o.run.configFlags)
	if err != nil {
		return err
	}
	ns := clients.Namespace
	if o.expected != nil {
		if err := o.expected.InNamespace(ns); err != nil {
			return exitcode.Wrap(exitcode.Usage, err)
		}
	}
	pods, err := matrix.Pods(ctx, clients.Kube, ns, o.selector)
	if err != nil {
		return err
	}
	g := matrix.Grid{Ports: o.portList, RoundTrip: o.roundTrip}
	known := map[string]bool{}
	for i := range pods {
		g.Sources = append(g.Sources, pods[i].Name)
		known[pods[i].Name] = true
	}
	g.Destinations = g.Sources
	if o.expected != nil {
		if err := o.expected.Known(known); err != nil {
			return exitcode.Wrap(exitcode.Usage, err)
		}
	}
	if len(g.Ports) == 0 {
		if g.Ports, err = o.servedPorts(ctx, clients.Kube.NetworkingV1().NetworkPolicies(ns), pods); err != nil {
			return err
		}
	}
	traces, cells, err := matrix.Traces(ctx, g, pods, ns, o.roundTrip, o.run.timeout)
	if err != nil {
		return exitcode.Wrap(exitcode.Usage, err)
	}
	started := time.Now()
	tracing := o.run.tracing(clients)
	closePool := tracing.ShareHelpers(ctx, o.run.shareHelpers, traces, o.run.parallel, "tfmatrix-"+o.run.deps.Suffix())
	rep := newMatrixReporter(o, clients, g, traces, cells)
	runner := &check.Runner{Parallel: o.run.parallel, Now: time.Now, Run: tracing.RunFunc(), WaitTag: tracing.WaitTag, Progress: rep.progress}
	results := runner.RunAll(ctx, traces)
	poolErr := closePool()
	return o.finish(rep, results, started, poolErr)
}

// policyLister lists a namespace's NetworkPolicies.
type policyLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*networkingv1.NetworkPolicyList, error)
}

func (o *MatrixOptions) servedPorts(ctx context.Context, policies policyLister, pods []corev1.Pod) ([]matrix.Port, error) {
	list, err := policies.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, exitcode.Errorf(exitcode.Setup, "list the NetworkPolicies (for the ports they name): %w; or give --port", err)
	}
	ports := matrix.Ports(pods, list.Items)
	if len(ports) == 0 {
		return nil, exitcode.UsageErrorf("no port to trace: the pods declare no container port and no NetworkPolicy that selects them names one: give --port (tcp/80, udp/53, icmp)")
	}
	return ports, nil
}

// finish writes the reports and folds the cells into the exit code
// (matrixCode).
func (o *MatrixOptions) finish(rep *matrixReporter, results []check.Result, started time.Time, poolErr error) error {
	mismatches := rep.mismatches(o.expected)
	err := errors.Join(rep.close(mismatches, time.Since(started)), poolErr)
	if o.run.junit != "" {
		report := matrix.JUnit{Name: DisplayName + " matrix", Started: started, PathText: view.PathText}
		if jerr := report.WriteFile(o.run.junit, rep.cells, rep.traces, results, mismatches); jerr != nil {
			err = errors.Join(err, jerr)
		}
	}
	code := matrixCode(results, mismatches, o.expected != nil)
	if err != nil && code == exitcode.OK {
		return exitcode.Wrap(exitcode.Setup, err)
	}
	if code == exitcode.OK {
		return nil
	}
	if len(mismatches) > 0 && code == exitcode.Verdict {
		names := make([]string, len(mismatches))
		for i, m := range mismatches {
			names[i] = m.Cell.String()
		}
		return exitcode.Errorf(code, "%d cells differ from %s: %s", len(names), o.expectFile, fewNames(names))
	}
	var names []string
	for i, res := range results {
		if !res.Passed() {
			names = append(names, rep.cells[i].String())
		}
	}
	what := "did not complete"
	if code == exitcode.Setup {
		what = "could not run"
	}
	if err != nil {
		what += " (" + err.Error() + ")"
	}
	return exitcode.Errorf(code, "%d of %d cells %s: %s", len(names), len(results), what, fewNames(names))
}

// fewNames lists the first names, and how many more there are: a matrix
// of 400 cells that all failed the same way says so in one line.
func fewNames(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// matrixCode is the run's exit code, in check's order: 4 when a cell
// could not run, then 3 when a cell did not complete (an interrupted run's
// differences are its unfinished cells, not a changed network), then 2
// when the file and the run differ.
func matrixCode(results []check.Result, mismatches []matrix.Mismatch, compared bool) exitcode.Code {
	if code := check.Code(results); code != exitcode.OK {
		return code
	}
	if compared && len(mismatches) > 0 {
		return exitcode.Verdict
	}
	return exitcode.OK
}
