// Package version holds the build's version, stamped by the Makefile with -ldflags -X.
package version

// Version is the release version (git describe); "dev" for unstamped builds.
var Version = "dev"

// Commit is the short git commit the binary was built from.
var Commit = "unknown"
