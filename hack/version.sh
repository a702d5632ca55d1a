#!/usr/bin/env sh
# Prints the build's version: the tag when HEAD is exactly a release tag
# (vX.Y.Z), else a semver pre-release naming the commit, which is also a
# valid image tag and a version krew accepts.
tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null) && { echo "$tag"; exit 0; }
commit=$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
dirty=""
git diff --quiet HEAD 2>/dev/null || dirty="-dirty"
echo "v0.1.0-dev.g${commit}${dirty}"
