#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and etcd from Go modules into an envtest-style asset folder.
#
#   OUT=<dir> K8S_VERSION=v1.34.3 ETCD_VERSION=v3.6.16 bash local/control-plane/build-assets.sh
#
# Why a wrapper module: k8s.io/kubernetes requires its staging modules at v0.0.0 and maps them with
# relative replaces, which only apply in the main module; `go install …@version` is refused. The wrapper
# replaces every staging module with its published v0.<minor>.<patch> tag. etcd gets its own wrapper so
# that MVS never mixes its dependency versions with Kubernetes'.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:?K8S_VERSION is required}"
ETCD_VERSION="${ETCD_VERSION:?ETCD_VERSION is required}"
OUT="${OUT:?OUT is required}"
export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0

command -v go >/dev/null || { echo "build-assets: Go is not installed (need go >= 1.24 on PATH)" >&2; exit 3; }

minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
staging="v0.${K8S_VERSION#v1.}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
partial="$OUT.partial"
rm -rf "$partial"; mkdir -p "$partial"

step() { printf '[build-assets] %s %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# go build -v names every package it compiles; print a progress line every 100 of them so that a
# build of several minutes never looks like a hang.
progress() { awk -v what="$1" '{ n++; if (n % 100 == 0) { printf "[build-assets]   %s: %d packages compiled\n", what, n; fflush() } } END { printf "[build-assets]   %s: %d packages compiled\n", what, n }'; }

step "kube-apiserver + kube-controller-manager + kubectl ${K8S_VERSION}: resolving modules"
mkdir "$work/k8s"; cd "$work/k8s"
gomod="$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | node -e '
  let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
  if(j.Error){console.error(j.Error);process.exit(1)} console.log(j.GoMod)})')"
{
  echo "module local.invalid/kube-apiserver-build"; echo
  grep -E '^go [0-9]' "$gomod"; grep -E '^godebug ' "$gomod" || true; echo
  echo "require k8s.io/kubernetes ${K8S_VERSION}"; echo
  echo "replace ("
  sed -nE 's#^[[:space:]]*(k8s\.io/[A-Za-z0-9._-]+)[[:space:]]+=>[[:space:]]+\./staging/.*#\1#p' "$gomod" \
    | sort -u | while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
  echo ")"
} > go.mod
step "wrapper go.mod has $(grep -c '=> k8s.io' go.mod) staging replaces"
kube_cmds=(kube-apiserver kube-controller-manager kubectl)
kube_pkgs=("${kube_cmds[@]/#/k8s.io/kubernetes/cmd/}")
go get "${kube_pkgs[@]/%/@${K8S_VERSION}}" 2>&1 | tail -n 3

ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $p.gitVersion=${K8S_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor}"
  ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done
# One go build for the three commands: their shared packages (client-go, apimachinery, most of pkg/) are compiled
# once in one action graph, and the two cores stay busy across the commands' boundaries.
step "compiling ${kube_cmds[*]}"
go build -p 2 -v -trimpath -buildvcs=false -tags=notest,grpcnotrace -ldflags "$ld" \
  -o "$partial/" "${kube_pkgs[@]}" 2>&1 | progress "${kube_cmds[*]}"
for cmd in "${kube_cmds[@]}"; do test -x "$partial/$cmd"; done

step "etcd ${ETCD_VERSION}: resolving modules"
mkdir "$work/etcd"; cd "$work/etcd"
printf 'module local.invalid/etcd-build\n\ngo 1.24.0\n' > go.mod
go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" 2>&1 | tail -n 3
step "compiling etcd"
go build -p 2 -v -trimpath -buildvcs=false \
  -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}" \
  -o "$partial/etcd" go.etcd.io/etcd/server/v3 2>&1 | progress etcd
test -x "$partial/etcd"

"$partial/kube-apiserver" --version
"$partial/kube-controller-manager" --version
"$partial/etcd" --version | head -n 1
rm -rf "$OUT"; mv "$partial" "$OUT"
step "done: $OUT ($(du -sh "$OUT" | cut -f1))"
