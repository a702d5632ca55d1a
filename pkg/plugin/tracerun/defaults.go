package tracerun

import (
	"fmt"
	"time"

	"github.com/kubectl-traceflow/kubectl-traceflow/internal/version"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/dscp"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/helperpod"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/install"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/tagalloc"
	"github.com/kubectl-traceflow/kubectl-traceflow/pkg/plugin/traceflow"
)

// DefaultHelperImage is the helper image this plugin version runs: the
// digest a release stamped into the binary, or else the image whose tag is
// the plugin's version, so the two always match.
func DefaultHelperImage() string {
	if version.HelperImage != "" {
		return version.HelperImage
	}
	return "ghcr.io/kubectl-traceflow/traceflow-helper:" + version.Version
}

// DefaultOptions are the options of a trace whose flags say nothing.
func DefaultOptions() Options {
	return Options{Engine: "auto", Timeout: traceflow.DefaultTimeoutSeconds * time.Second,
		HelperImage: DefaultHelperImage(), HelperNamespace: install.DefaultNamespace,
		OVSRunDir: helperpod.DefaultOVSRunDir, OVNRunDir: helperpod.OVNRunDir, Bridge: helperpod.DefaultBridge,
		AntreaNames: true}
}

// ValidateHelperImage checks --helper-image as the helper pods will use it.
func ValidateHelperImage(image string) error {
	if err := helperpod.ValidateImage(image); err != nil {
		return fmt.Errorf("--helper-image: %w", err)
	}
	return nil
}

// ValidateOVSRunDir checks --ovs-rundir as the helper pods will mount it.
func ValidateOVSRunDir(dir string) error {
	if err := helperpod.ValidateRunDir(dir); err != nil {
		return fmt.Errorf("--ovs-rundir: %w", err)
	}
	return nil
}

// MaxParallel is how many traces may run at once: one per tag of the pool,
// so that no trace waits for a tag where the run has the pool to itself.
// The run's traces on shared helpers share each DSCP value it holds, three
// at once (dscp.Tag); traces with helper pods of their own beyond the 14
// DSCP values wait for one.
func MaxParallel() int { return len(tagalloc.Pool()) * dscp.ECNVariants }
