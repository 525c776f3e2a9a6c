#!/usr/bin/env bash
# Build the binaries a real node needs, from the Go module proxy, into the same cache as localcluster/build.sh:
#   kubelet  -> $TRAINER_CACHE/bin/kubernetes-<KUBERNETES_VERSION>/kubelet  (localcluster/build.sh's wrapper-module
#               technique; reuses its resolved go.mod in $TRAINER_CACHE/src/kubernetes-<ver> when present)
#   kube-proxy -> $TRAINER_CACHE/bin/kubernetes-<KUBERNETES_VERSION>/kube-proxy  (the same module: Services'
#               ClusterIPs for pods and for the apiserver's calls to webhooks behind a Service)
#   coredns  -> $TRAINER_CACHE/bin/coredns-<COREDNS_VERSION>/coredns  (only the plugins cluster DNS needs,
#               so none of the cloud SDKs of the full plugin.cfg are downloaded)
#   pause    -> $TRAINER_CACHE/bin/realnode-pause/pause  (localcluster/realnode/pause.go, static)
# Each is built once. Usage: localcluster/realnode/build.sh [kubelet] [kube_proxy] [coredns] [pause]   (default: all)
# localcluster/realnode/build.sh --fetch COMPONENT...: only download the modules their builds need (fetch_only).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../versions.env disable=SC1091
source "$here/../versions.env"
# shellcheck source=versions.env disable=SC1091
source "$here/versions.env"
cache="${TRAINER_CACHE:-$HOME/.cache/trainer}"
# shellcheck source=../go-env.sh disable=SC1091
source "$here/../go-env.sh"
log() { printf '[realnode-build] %s\n' "$*" >&2; }

build_kubelet() { build_node_command kubelet; }
build_kube_proxy() { build_node_command kube-proxy; }

# build_node_command CMD: k8s.io/kubernetes/cmd/CMD (kubelet or kube-proxy) into the kubernetes bin dir.
build_node_command() {
  local cmd="$1" ver="$KUBERNETES_VERSION" out="$cache/bin/kubernetes-$KUBERNETES_VERSION"
  [ -x "$out/$cmd" ] && return 0
  local mod="$cache/src/kubelet-$ver" minor staging gomod
  minor="${ver#v1.}"; minor="${minor%%.*}"; staging="v0.${ver#v1.}"
  mkdir -p "$mod" "$out"
  log "$cmd $ver: resolving modules in $mod"
  if [ -f "$cache/src/kubernetes-$ver/go.mod" ]; then
    cp "$cache/src/kubernetes-$ver/go.mod" "$cache/src/kubernetes-$ver/go.sum" "$mod/"
  else
    (cd "$mod" && go mod download -json "k8s.io/kubernetes@$ver" >/dev/null)
    gomod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$ver.mod"
    {
      echo "module local/kubernetes-build"; echo; echo "go 1.24.0"; echo
      echo "require k8s.io/kubernetes $ver"; echo; echo "replace ("
      grep -E '=> \./staging/src/' "$gomod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } >"$mod/go.mod"
  fi
  cat >"$mod/tools.go" <<'EOT'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOT
  (cd "$mod" && go mod tidy)
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$ver -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$ver -X k8s.io/component-base/version.gitTreeState=clean"
  log "$cmd $ver: building"
  (cd "$mod" && go build -trimpath -ldflags "$ldflags" -o "$out/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$out/$cmd.tmp" "$out/$cmd"
}

build_coredns() {
  local ver="$COREDNS_VERSION" out="$cache/bin/coredns-$COREDNS_VERSION"
  [ -x "$out/coredns" ] && return 0
  local mod="$cache/src/coredns-$ver" gomod
  mkdir -p "$mod" "$out"
  log "coredns $ver: resolving modules in $mod"
  (cd "$mod" && go mod download -json "github.com/coredns/coredns@$ver" >/dev/null)
  gomod="$(go env GOMODCACHE)/cache/download/github.com/coredns/coredns/@v/$ver.mod"
  {
    echo "module local/coredns-build"; echo
    awk '$1 == "go" {print; exit}' "$gomod"; echo
    echo "require github.com/coredns/coredns $ver"
  } >"$mod/go.mod"
  # coremain plus the few plugins a cluster DNS server uses (plugin.cfg order is kept by
  # core/dnsserver's fixed directive list; a plugin not imported is simply unknown).
  cat >"$mod/main.go" <<'EOT'
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() { coremain.Run() }
EOT
  (cd "$mod" && go mod tidy)
  log "coredns $ver: building"
  (cd "$mod" && go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$ver" \
    -o "$out/coredns.tmp" .)
  mv "$out/coredns.tmp" "$out/coredns"
}

build_pause() {
  local out="$cache/bin/realnode-pause"
  [ -x "$out/pause" ] && cmp -s "$here/pause.go" "$out/pause.go" && return 0
  mkdir -p "$out"
  log "pause: building"
  (cd "$here" && go build -trimpath -ldflags '-s -w' -o "$out/pause.tmp" pause.go)
  cp "$here/pause.go" "$out/pause.go"
  mv "$out/pause.tmp" "$out/pause"
}

fetch=false
[ "${1:-}" = "--fetch" ] && fetch=true && shift
components=(kubelet kube_proxy coredns pause)
[ "$#" -gt 0 ] && components=("$@")
for component in "${components[@]}"; do
  declare -F "build_$component" >/dev/null || { log "unknown component '$component'"; exit 2; }
done
if $fetch; then
  fetch_only "${components[@]}"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.realnode-build.lock"
flock -n 9 || { log "waiting for another localcluster/realnode/build.sh run to finish"; flock 9; }
for component in "${components[@]}"; do
  start=$SECONDS
  "build_$component"
  log "$component: ready ($((SECONDS - start))s)"
done
echo "$cache/bin"
