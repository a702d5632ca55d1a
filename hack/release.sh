#!/usr/bin/env bash
# Builds the release archives: one per platform, each with the plugin binary,
# its kubectl completion script, LICENSE and README.md, plus SHA256SUMS.
# Reproducible: -trimpath, stripped, no build ID, files in a fixed order with
# fixed owners and modification times.
set -euo pipefail
version=${RELEASE_VERSION:?RELEASE_VERSION is required (vX.Y.Z)}
commit=${COMMIT:-unknown}
out=${DIST:-dist}
platforms=${PLATFORMS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64"}
pkg=github.com/kubectl-traceflow/kubectl-traceflow/internal/version
ldflags="-s -w -buildid= -X $pkg.Version=$version -X $pkg.Commit=$commit"
# The release pipeline pushes the helper image first and passes its
# digest-pinned reference here, so the plugin's default is exactly that image.
if [ -n "${HELPER_IMAGE_REF:-}" ]; then
  case $HELPER_IMAGE_REF in
    *@sha256:*) ;;
    *) echo "HELPER_IMAGE_REF=$HELPER_IMAGE_REF: want IMAGE@sha256:DIGEST" >&2; exit 2 ;;
  esac
  ldflags+=" -X $pkg.HelperImage=$HELPER_IMAGE_REF"
fi
# A fixed timestamp (the commit's) keeps archives byte-identical across builds.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}

mkdir -p "$out"
rm -f "$out"/kubectl-traceflow_* "$out/SHA256SUMS"
for p in $platforms; do
  os=${p%/*} arch=${p#*/}
  name=kubectl-traceflow_${version}_${os}_${arch}
  stage=$(mktemp -d)
  exe=kubectl-traceflow complete=kubectl_complete-traceflow
  if [ "$os" = windows ]; then exe=$exe.exe complete=$complete.cmd; fi
  echo "building $name" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$stage/$exe" ./cmd/kubectl-traceflow
  if [ "$os" = windows ]; then
    cp hack/completion/kubectl_complete-traceflow.cmd "$stage/$complete"
  else
    cp hack/completion/kubectl_complete-traceflow "$stage/$complete"
    chmod 0755 "$stage/$complete"
  fi
  cp LICENSE README.md "$stage/"
  files=("$exe" "$complete" LICENSE README.md)
  touch -d "@$epoch" "$stage"/*
  if [ "$os" = windows ]; then
    (cd "$stage" && TZ=UTC zip -X -q "$OLDPWD/$out/$name.zip" "${files[@]}")
  else
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
      -C "$stage" -cf - "${files[@]}" | gzip -n > "$out/$name.tar.gz"
  fi
  rm -rf "$stage"
done
(cd "$out" && sha256sum kubectl-traceflow_* > SHA256SUMS)
cat "$out/SHA256SUMS"
