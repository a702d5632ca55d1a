package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/check"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/exitcode"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tracerun"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/view"
)

// defaultParallel is how many traces of a suite run at once unless
// --parallel says otherwise: 8 of the pool's 42 tags (3 of its 14 DSCP values
// on shared helpers), leaving tags for other users' traces, and no more helper
// pods at once than a small node starts quickly.
const defaultParallel = 8

// CheckOptions is `kubectl traceflow check -f FILE`.
type CheckOptions struct {
	genericiooptions.IOStreams
	configFlags *genericclioptions.ConfigFlags
	deps        Deps

	// Flag values.
	files           []string
	junit           string
	output          string
	color           string
	parallel        int
	timeout         time.Duration
	engine          string
	helperImage     string
	helperNamespace string
	ovsRunDir       string
	bridge          string
	shareHelpers    bool

	// template, when set, is the single-trace command that asked for
	// --all-endpoints: its packet flags and run options apply to every
	// trace.
	template *TraceOptions

	// Typed inputs, set by Complete.
	suites   []*check.Suite
	format   string
	useColor bool
}

// newCheckOptions are check's options with every flag at its default.
func newCheckOptions(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *CheckOptions {
	d := tracerun.DefaultOptions()
	return &CheckOptions{IOStreams: streams, configFlags: cf, deps: deps, color: "auto", parallel: defaultParallel,
		timeout: d.Timeout, engine: d.Engine, helperImage: d.HelperImage, helperNamespace: d.HelperNamespace,
		ovsRunDir: d.OVSRunDir, bridge: d.Bridge, shareHelpers: true}
}

func newCheckCommand(streams genericiooptions.IOStreams, deps Deps, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := newCheckOptions(streams, deps, cf)
	cmd := &cobra.Command{
		Use:   "check -f FILE",
		Short: "Run a suite of traces, each with its expectation, for CI: a table or plain lines, JUnit XML, one exit code",
		Long: `Run every case of one or more suite files (kind CheckSuite, apiVersion
` + check.APIVersion + `; pkg/plugin/check/check-suite.schema.json in the repository documents
the format) as traces, concurrently within the tag pool. A case goes from
a pod, a selector's pods, a node (from.node) or an address outside the
cluster (from.ip, with via: node/NAME for an externalIP or a LoadBalancer
IP) to a pod, a selector's first pod, a Service, an IP or a node
(to.node); roundTrip: true follows the answer back.

Every file is read and every case resolved (pods, selectors, Services)
before anything is created: a bad file exits 1 naming the file, the line
and the field.

The exit code is 0 when every trace met its expectation, else the worst
of theirs: 4 (setup failure) before 3 (did not complete) before 2 (wrong
verdict).

With the helper engine, one helper pod per node serves every trace of the
run (each still with its own tag, cookie and record); the plugin hands it
the traces through its standard input, which needs create on pods/attach.
Without that right, or with --share-helpers=false, each trace starts
helper pods of its own, as a single trace does.`,
		Example: `  # Run a suite; a table on a terminal, one line per trace when piped
  kubectl traceflow check -f smoke.yaml

  # Every suite in a directory, with a JUnit report for the CI system
  kubectl traceflow check -f checks/ --junit report.xml

  # From standard input, one JSON object per trace
  cat smoke.yaml | kubectl traceflow check -f - -o json`,
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
	f.StringArrayVarP(&o.files, "filename", "f", nil, "a suite file, a directory of them (*.yaml, *.yml), or - for standard input; may be repeated")
	f.VarP(&enumValue{&o.output, []string{outputPlain, outputJSON}}, "output", "o",
		"output format (default: a live table on a terminal, plain lines otherwise); json writes one object per trace")
	o.addRunFlags(f)
	return cmd
}

// addRunFlags adds the flags of how a run of many traces runs, which check
// and matrix share: the report, colour, concurrency, timeout and engine.
func (o *CheckOptions) addRunFlags(f *pflag.FlagSet) {
	f.StringVar(&o.junit, "junit", "", "also write a JUnit XML report to FILE")
	f.Var(&enumValue{&o.color, []string{"auto", "always", "never"}}, "color", "colour the output: auto honours NO_COLOR and needs a terminal")
	f.IntVar(&o.parallel, "parallel", o.parallel, fmt.Sprintf("how many traces run at once, 1-%d (the tag pool: 14 DSCP values, each carried by up to 3 traces of the run on shared helpers, told apart by ECN); a roundTrip case counts twice (its answer holds a tag too)", tracerun.MaxParallel()))
	f.Var(&timeoutValue{&o.timeout}, "timeout", "timeout of a trace whose case and defaults set none, 1s to 300s")
	f.Var(&enumValue{&o.engine, []string{"auto", "agent", "helper"}}, "engine",
		"who traces: agent (Antrea's agents), helper (our node helper pods), or auto (agent where Antrea serves Traceflow)")
	f.StringVar(&o.helperImage, "helper-image", o.helperImage, "image of the node helper pods (helper engine)")
	f.StringVar(&o.helperNamespace, "helper-namespace", o.helperNamespace,
		"namespace for the helper pods and tag claims; it must allow privileged pods (PodSecurity)")
	f.StringVar(&o.ovsRunDir, "ovs-rundir", o.ovsRunDir, "the nodes' Open vSwitch run directory (db.sock, BRIDGE.mgmt)")
	f.StringVar(&o.bridge, "bridge", o.bridge, "the OVS bridge that carries pod traffic")
	f.BoolVar(&o.shareHelpers, "share-helpers", o.shareHelpers,
		"helper engine: one helper pod per node for the whole run (needs create on pods/attach); false starts helper pods per trace")
}

// Complete reads and parses the suite files. It reads no kubeconfig.
func (o *CheckOptions) Complete() error {
	if len(o.files) == 0 {
		return exitcode.UsageErrorf("no suite: give -f FILE (a file, a directory, or - for standard input); see '%s check --help'", DisplayName)
	}
	files, err := o.expand()
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := o.read(f)
		if err != nil {
			return err
		}
		s, err := check.Parse(f, data)
		if err != nil {
			return exitcode.Wrap(exitcode.Usage, err)
		}
		o.suites = append(o.suites, s)
	}
	terminal := o.deps.IsTerminal(o.Out)
	o.format = o.output
	if o.format == "" {
		o.format = outputPlain
		if terminal {
			o.format = outputLive
		}
	}
	o.useColor = colorEnabled(o.color, terminal, o.deps.Getenv)
	return nil
}

// stdinName is how errors name a suite read from standard input.
const stdinName = "<stdin>"

// expand turns -f values into files: a directory stands for its *.yaml
// and *.yml files, in name order.
func (o *CheckOptions) expand() ([]string, error) {
	var out []string
	stdin := false
	for _, f := range o.files {
		if f == "-" {
			if stdin {
				return nil, exitcode.UsageErrorf("-f - given twice: standard input can be read once")
			}
			stdin = true
			out = append(out, stdinName)
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			return nil, exitcode.UsageErrorf("suite %s: %w", f, err)
		}
		if !st.IsDir() {
			out = append(out, f)
			continue
		}
		entries, err := os.ReadDir(f)
		if err != nil {
			return nil, exitcode.UsageErrorf("suite directory %s: %w", f, err)
		}
		var found []string
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				found = append(found, filepath.Join(f, e.Name()))
			}
		}
		if len(found) == 0 {
			return nil, exitcode.UsageErrorf("suite directory %s holds no *.yaml or *.yml file", f)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

func (o *CheckOptions) read(f string) ([]byte, error) {
	if f == stdinName {
		if o.In == nil {
			return nil, exitcode.UsageErrorf("-f -: no standard input")
		}
		b, err := io.ReadAll(o.In)
		if err != nil {
			return nil, exitcode.UsageErrorf("read the suite from standard input: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(f) //nolint:gosec // the user names the file to read
	if err != nil {
		return nil, exitcode.UsageErrorf("read suite %s: %w", f, err)
	}
	return b, nil
}

// Validate checks the flags, still without a cluster.
func (o *CheckOptions) Validate() error {
	if n := tracerun.MaxParallel(); o.parallel < 1 || o.parallel > n {
		return exitcode.UsageErrorf("--parallel %d: give 1 to %d (the tags a trace can be marked with)", o.parallel, n)
	}
	if err := tracerun.ValidateOVSRunDir(o.ovsRunDir); err != nil {
		return exitcode.Wrap(exitcode.Usage, err)
	}
	if o.engine == "agent" {
		if err := check.OneWayOnly(o.suites, "--engine agent: Antrea's Traceflow follows the probe one way only: use --engine helper (or auto) for a round trip, or drop roundTrip"); err != nil {
			return exitcode.Wrap(exitcode.Usage, err)
		}
		if err := check.PodSourcesOnly(o.suites, "--engine agent: Antrea's Traceflow starts a probe only at a pod's own port: use --engine helper (or auto), which injects as the node, or where the via node's uplink receives it"); err != nil {
			return exitcode.Wrap(exitcode.Usage, err)
		}
	}
	if o.junit != "" {
		if st, err := os.Stat(o.junit); err == nil && st.IsDir() {
			return exitcode.UsageErrorf("--junit %s is a directory: name a file", o.junit)
		}
		if dir := filepath.Dir(o.junit); dir != "" {
			if _, err := os.Stat(dir); err != nil {
				return exitcode.UsageErrorf("--junit %s: its directory %s does not exist", o.junit, dir)
			}
		}
	}
	return nil
}

// Run resolves every case, then runs the traces and reports.
func (o *CheckOptions) Run(ctx context.Context) error {
	clients, err := o.deps.Connect(o.configFlags)
	if err != nil {
		return err
	}
	planner := &check.Planner{Lookup: clients.Lookup, Pods: check.PodsFromClientset(clients.Kube),
		Namespace: clients.Namespace, DefaultTimeout: o.timeout}
	traces, err := planner.Plan(ctx, o.suites)
	if err != nil {
		return err
	}
	started := time.Now()
	tracing := o.tracing(clients)
	closePool := tracing.ShareHelpers(ctx, o.shareHelpers, traces, o.parallel, "tfcheck-"+o.deps.Suffix())
	rep := newSuiteReporter(o, traces)
	runner := &check.Runner{Parallel: o.parallel, Now: time.Now, Run: tracing.RunFunc(), WaitTag: tracing.WaitTag, Progress: rep.progress}
	results := runner.RunAll(ctx, traces)
	poolErr := closePool()
	code := check.Code(results)
	err = errors.Join(rep.close(results, code, time.Since(started)), poolErr)
	if o.junit != "" {
		report := check.JUnit{Name: DisplayName + " check", Started: started, PathText: view.PathText}
		if jerr := report.WriteFile(o.junit, traces, results); jerr != nil {
			err = errors.Join(err, jerr)
		}
	}
	if err != nil && code == exitcode.OK {
		return exitcode.Wrap(exitcode.Setup, err)
	}
	if code != exitcode.OK {
		return exitcode.Errorf(code, "%s", failureSummary(traces, results, err))
	}
	return nil
}

// tracing is how the run's traces run: the defaults of
// `kubectl traceflow SRC DST`, or the options of the trace command that
// asked for --all-endpoints, with the run's engine and helper settings.
func (o *CheckOptions) tracing(clients *Clients) *check.Tracing {
	t := &check.Tracing{Clients: clients, Suffix: o.deps.Suffix,
		Probe: tracerun.DefaultProbe(), Options: tracerun.Options{AntreaNames: true}}
	if o.template != nil {
		t.Probe, t.Options = o.template.probe(), o.template.runOptions()
	}
	t.Options.Engine, t.Options.HelperImage, t.Options.HelperNamespace = o.engine, o.helperImage, o.helperNamespace
	t.Options.OVSRunDir, t.Options.Bridge = o.ovsRunDir, o.bridge
	t.Options.Abandon = newAbandoner(o.deps.Abandon, cleanupTail(o.helperNamespace, t.Options.Keep, o.configFlags))
	t.Options.ManyTraces()
	return t
}

// failureSummary names the traces that missed their expectation.
func failureSummary(traces []check.Trace, results []check.Result, extra error) string {
	var failed []string
	for i, r := range results {
		if !r.Passed() {
			failed = append(failed, fmt.Sprintf("%q", traces[i].Name))
		}
	}
	s := fmt.Sprintf("%d of %d traces did not meet their expectation: %s", len(failed), len(results), strings.Join(failed, ", "))
	if extra != nil {
		s += "; " + extra.Error()
	}
	return s
}
