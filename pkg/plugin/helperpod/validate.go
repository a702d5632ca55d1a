package helperpod

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// An image reference as the container runtimes take it:
// [HOST[:PORT]/]PATH[:TAG][@ALGO:HEX]. The digest pins the exact image, so a
// release can name what it built and a user can pin what they pushed.
var (
	nameComponent = `[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*`
	hostPart      = `(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?`
	imageRef      = regexp.MustCompile(`^` + hostPart + nameComponent + `(?:/` + nameComponent + `)*` +
		`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?` +
		`(?:@(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}))?$`)
)

// ValidateImage checks an image reference, tag or digest or both, and says
// what a good one looks like.
func ValidateImage(ref string) error {
	if ref == "" {
		return fmt.Errorf("the helper image is empty: give e.g. registry.example/traceflow-helper:v0.1.0 or ...@sha256:<64 hex digits>")
	}
	if len(ref) > 512 || !imageRef.MatchString(ref) {
		if _, d, ok := strings.Cut(ref, "@"); ok {
			return fmt.Errorf("image %q: the digest after @ must be sha256: and 64 lowercase hex digits (got %q)", ref, d)
		}
		return fmt.Errorf("image %q is not an image reference: give e.g. registry.example/traceflow-helper:v0.1.0 or ...@sha256:<64 hex digits>", ref)
	}
	return nil
}

// ValidateRunDir checks the OVS run directory, which becomes a hostPath on
// every node the trace touches: an absolute, clean path, so that what the
// pod mounts is exactly what the user typed (no "..", no relative path the
// kubelet would resolve against its own directory).
func ValidateRunDir(dir string) error {
	switch {
	case !path.IsAbs(dir):
		return fmt.Errorf("the OVS run directory %q is not an absolute path: give e.g. /var/run/openvswitch", dir)
	case path.Clean(dir) != dir:
		return fmt.Errorf("the OVS run directory %q is not a clean path: write %s", dir, path.Clean(dir))
	case dir == "/":
		return fmt.Errorf("the OVS run directory cannot be / : give the directory holding db.sock, e.g. /var/run/openvswitch")
	case strings.ContainsAny(dir, "\x00\n"):
		return fmt.Errorf("the OVS run directory %q holds a control character", dir)
	}
	return nil
}
