// Package version holds the build's version, stamped by the Makefile with -ldflags -X.
package version

// Version is the release version (git describe); "dev" for unstamped builds.
var Version = "dev"

// Commit is the short git commit the binary was built from.
var Commit = "unknown"

// HelperImage is, when stamped, the helper image this build runs by
// default, pinned by digest (IMAGE@sha256:...): the release pipeline pushes
// the image first and stamps its digest into the binaries it packs. Empty
// means the tag of Version.
var HelperImage = ""
