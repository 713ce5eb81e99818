#!/usr/bin/env bash
# Builds the upstream Cluster API core manager from its Go module into <dir>/cluster-api-manager (static binary).
# Its CRDs and webhook manifests are read from the same module in the Go module cache (assets.ts).
#
#   OUT=<dir> CAPI_VERSION=v1.14.2 bash local/control-plane/build-capi.sh
#
# Why a wrapper module: from v1.14 the manager's main package is sigs.k8s.io/cluster-api/core and the module
# replaces sigs.k8s.io/cluster-api/api with ./api, so `go install …@v1.14.x` is refused. The wrapper requires the
# separately published api module at the same tag instead (older releases have main at the module root, no replace).
set -euo pipefail

CAPI_VERSION="${CAPI_VERSION:?CAPI_VERSION is required}"
OUT="${OUT:?OUT is required}"
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0

command -v go >/dev/null || { echo "build-capi: Go is not installed (need go >= 1.24 on PATH)" >&2; exit 3; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
partial="$OUT.partial"
rm -rf "$partial"; mkdir -p "$partial"

step() { printf '[build-capi] %s %s\n' "$(date -u +%H:%M:%S)" "$*"; }
progress() { awk -v what="$1" '{ n++; if (n % 100 == 0) { printf "[build-capi]   %s: %d packages compiled\n", what, n; fflush() } } END { printf "[build-capi]   %s: %d packages compiled\n", what, n }'; }

step "cluster-api ${CAPI_VERSION}: resolving modules"
cd "$work"
dir="$(go mod download -json "sigs.k8s.io/cluster-api@${CAPI_VERSION}" | node -e '
  let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
  if(j.Error){console.error(j.Error);process.exit(1)} console.log(j.Dir)})')"
gover="$(sed -nE 's/^go ([0-9.]+).*/\1/p' "$dir/go.mod")"
printf 'module local.invalid/cluster-api-build\n\ngo %s\n' "$gover" > go.mod
go get "sigs.k8s.io/cluster-api@${CAPI_VERSION}" 2>&1 | tail -n 3
if grep -qE '^replace[[:space:]]+sigs\.k8s\.io/cluster-api/api[[:space:]]+=>' "$dir/go.mod"; then
  go get "sigs.k8s.io/cluster-api/api@${CAPI_VERSION}" 2>&1 | tail -n 3
fi

if [ -f "$dir/core/main.go" ]; then pkg=sigs.k8s.io/cluster-api/core; else pkg=sigs.k8s.io/cluster-api; fi
step "compiling the core manager ($pkg)"
go build -p 2 -v -trimpath -buildvcs=false \
  -ldflags "-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=${CAPI_VERSION} -X sigs.k8s.io/cluster-api/version.gitTreeState=clean" \
  -o "$partial/cluster-api-manager" "$pkg" 2>&1 | progress cluster-api-manager
test -x "$partial/cluster-api-manager"

echo "$CAPI_VERSION" > "$partial/version"
rm -rf "$OUT"; mv "$partial" "$OUT"
step "done: $OUT ($(du -sh "$OUT" | cut -f1))"
