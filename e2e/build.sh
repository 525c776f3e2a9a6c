#!/usr/bin/env bash
# Build the real cluster components the local e2e cluster runs, from the Go module proxy.
#
# Every binary lands in "$TRAINER_CACHE/bin/<component>-<version>/" and is built only once:
# a fresh clone on the same machine reuses it. GOMODCACHE and GOCACHE stay Go's defaults
# (outside the checkout), so a partial build also resumes quickly.
#
# Usage: e2e/build.sh            # build what is missing, print the bin directory
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache="${TRAINER_CACHE:-$HOME/.cache/trainer}"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

log() { printf '[build] %s\n' "$*" >&2; }

# build_kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from
# k8s.io/kubernetes, with every staging module replaced by its published v0.Y.Z twin.
build_kubernetes() {
  local ver="$KUBERNETES_VERSION" out="$cache/bin/kubernetes-$KUBERNETES_VERSION"
  [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && \
    [ -x "$out/kube-scheduler" ] && [ -x "$out/kubectl" ] && return 0
  local mod="$cache/src/kubernetes-$ver" minor staging
  minor="${ver#v1.}"; minor="${minor%%.*}"
  staging="v0.${ver#v1.}"
  mkdir -p "$mod" "$out"
  log "kubernetes $ver: resolving modules in $mod"
  (cd "$mod" && go mod download -json "k8s.io/kubernetes@$ver" >/dev/null)
  local gomod
  gomod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$ver.mod"
  {
    echo "module local/kubernetes-build"
    echo
    echo "go 1.24.0"
    echo
    echo "require k8s.io/kubernetes $ver"
    echo
    echo "replace ("
    grep -E '=> \./staging/src/' "$gomod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$mod/go.mod"
  cat >"$mod/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
  (cd "$mod" && go mod tidy)
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$ver -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$ver -X k8s.io/component-base/version.gitTreeState=clean"
  local cmd
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$out/$cmd" ] && continue
    log "kubernetes $ver: building $cmd"
    (cd "$mod" && go build -trimpath -ldflags "$ldflags" -o "$out/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
    mv "$out/$cmd.tmp" "$out/$cmd"
  done
}

# build_etcd: a current etcd server through a wrapper module whose main calls etcdmain.Main.
build_etcd() {
  local ver="$ETCD_VERSION" out="$cache/bin/etcd-$ETCD_VERSION"
  [ -x "$out/etcd" ] && return 0
  local mod="$cache/src/etcd-$ver"
  mkdir -p "$mod" "$out"
  log "etcd $ver: building"
  cat >"$mod/go.mod" <<EOF
module local/etcd-build

go 1.24.0

require go.etcd.io/etcd/server/v3 $ver
EOF
  cat >"$mod/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  (cd "$mod" && go mod tidy && go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" .)
  mv "$out/etcd.tmp" "$out/etcd"
}

# build_kwok: the KWOK controller that runs fake nodes and drives pod phases.
build_kwok() {
  local ver="$KWOK_VERSION" out="$cache/bin/kwok-$KWOK_VERSION"
  [ -x "$out/kwok" ] && return 0
  mkdir -p "$out"
  log "kwok $ver: building"
  GOBIN="$out" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$ver"
}

build_etcd
build_kwok
build_kubernetes
echo "$cache/bin"
