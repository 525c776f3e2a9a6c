#!/usr/bin/env bash
# Build the real cluster components the local cluster runs, from the Go module proxy.
#
# Every binary lands in "$TRAINER_CACHE/bin/<component>-<version>/" and is built only once:
# a fresh clone on the same machine reuses it. GOMODCACHE and GOCACHE stay Go's defaults
# (outside the checkout), so a partial build also resumes quickly.
#
# Usage: localcluster/build.sh                  # build every component that is missing, print the bin directory
#        localcluster/build.sh volcano kueue    # build only the named components
#        localcluster/build.sh --fetch kueue    # only download the modules their builds need (fetch_only)
# Components: etcd kwok kubernetes volcano kueue helm trainer_e2e
#             upstream (only when named: the bench's upstream side)
#             mpi_operator (only when named: the MPIJob migration test)
#             mpi_operator_e2e (only when named: mpi-operator's own e2e suite, e2e/test_mpi_operator_e2e.py)
#             kueue_e2e (only when named: Kueue's own extended e2e suites, e2e/test_kueue_e2e.py)
#             prometheus (only when named: Prometheus and promtool, for the chart's rules and their tests)
#             katib (only when named: Katib's controller, DB manager, metrics collector and Goptuna suggestion)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=SCRIPTDIR/versions.env disable=SC1091
source "$here/versions.env"

cache="${TRAINER_CACHE:-$HOME/.cache/trainer}"
# shellcheck source=SCRIPTDIR/go-env.sh disable=SC1091
source "$here/go-env.sh"

log() { printf '[build] %s\n' "$*" >&2; }

# module_dir MODULE VERSION: download MODULE@VERSION into the module cache and print its directory.
module_dir() {
  local json dir
  mkdir -p "$cache/src"
  if ! json="$(cd "$cache/src" && go mod download -json "$1@$2")"; then
    printf '%s\n' "$json" >&2
    return 1
  fi
  dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p' <<<"$json")"
  [ -d "$dir" ] || { log "$1@$2: no module directory in: $json"; return 1; }
  printf '%s\n' "$dir"
}

# module_commit MODULE VERSION: the git commit the proxy recorded for a downloaded MODULE@VERSION.
module_commit() {
  sed -n 's/.*"Hash": *"\([0-9a-f]*\)".*/\1/p' "$(go env GOMODCACHE)/cache/download/$1/@v/$2.info"
}

# required_version GOMOD MODULE: the version of MODULE that the go.mod file GOMOD requires.
required_version() { awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$1"; }

# compile_commands OUT NAME=PACKAGE... -- FLAG...: one `go build FLAG...` (in the current directory) of every
# PACKAGE whose OUT/NAME is missing, each binary named after its package's last path element, then moved
# to OUT/NAME. One invocation compiles and links the commands side by side on every core, where one
# build per command leaves a core idle while each links alone.
compile_commands() {
  local out="$1" staged="$1/.build" pair i
  local names=() pkgs=()
  shift
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    pair="$1"
    shift
    [ -x "$out/${pair%%=*}" ] && continue
    names+=("${pair%%=*}")
    pkgs+=("${pair#*=}")
  done
  shift
  [ "${#pkgs[@]}" -eq 0 ] && return 0
  log "building ${names[*]} in $out"
  rm -rf "$staged"
  mkdir -p "$staged"
  go build "$@" -o "$staged/" "${pkgs[@]}"
  for i in "${!names[@]}"; do
    mv "$staged/${pkgs[$i]##*/}" "$out/${names[$i]}"
  done
  rmdir "$staged"
}

# copy_crds DEST FILE...: copy CRD manifests out of the (read-only) module cache.
copy_crds() {
  local dest="$1"
  shift
  mkdir -p "$dest"
  install -m 0644 "$@" "$dest/"
}

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
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$ver -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$ver -X k8s.io/component-base/version.gitTreeState=clean"
  local cmd pairs=()
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    pairs+=("$cmd=k8s.io/kubernetes/cmd/$cmd")
  done
  on_build_list "$mod" kubernetes tidy_then compile_commands "$out" "${pairs[@]}" -- -trimpath -ldflags "$ldflags"
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

# volcano_apis VERSION GOMOD MOD: what replaces volcano.sh/apis in the build of Volcano VERSION
# (nothing printed: no replacement). Volcano v1.15's go.mod replaces volcano.sh/apis with its
# staging directory (./staging/src/volcano.sh/apis), a module of its own that the module zip
# leaves out. The replacement is the version Volcano requires when the proxy serves it; else
# VOLCANO_APIS_VERSION (versions.env) copied into MOD/apis with volcano_apis_compat applied.
volcano_apis() {
  local ver="$1" gomod="$2" mod="$3" want dir
  grep -Eq '^[[:space:]]*volcano.sh/apis => \.{1,2}/' "$gomod" || return 0
  want="$(required_version "$gomod" volcano.sh/apis)"
  if dir="$(module_dir volcano.sh/apis "$want" 2>/dev/null)"; then
    printf 'volcano.sh/apis %s\n' "$want"
    return 0
  fi
  if [ -z "${VOLCANO_APIS_VERSION:-}" ]; then
    log "volcano $ver: the proxy refuses volcano.sh/apis $want and versions.env names no VOLCANO_APIS_VERSION"
    return 1
  fi
  log "volcano $ver: the proxy refuses volcano.sh/apis $want; building with $VOLCANO_APIS_VERSION (see versions.env)"
  dir="$(module_dir volcano.sh/apis "$VOLCANO_APIS_VERSION")"
  rm -rf "$mod/apis"
  cp -R "$dir" "$mod/apis"
  chmod -R u+w "$mod/apis"
  volcano_apis_compat "$mod/apis"
  printf '%s\n' "$mod/apis"
}

# volcano_apis_compat DIR: what the staging volcano.sh/apis of Volcano v1.15.1 has beyond
# volcano.sh/apis v1.14.0 other than comments, one validation marker and regenerated client code:
# the name of the queue admission gate (pkg/apis/scheduling/v1beta1/labels.go).
volcano_apis_compat() {
  local pkg="$1/pkg/apis/scheduling/v1beta1"
  grep -q 'QueueAllocationGateKey' "$pkg"/*.go && return 0
  cat >"$pkg/queue_allocation_gate.go" <<'EOF'
package v1beta1

// QueueAllocationGateKey names the annotation and the scheduling gate of queue admission.
const QueueAllocationGateKey = GroupName + "/queue-allocation-gate"
EOF
}

# build_volcano: vc-scheduler, vc-controller-manager and vc-webhook-manager, and Volcano's CRDs in
# crds/. Volcano's go.mod has replace directives (old grpc, k8s.io staging pins), so `go install`
# refuses it: build through a wrapper module of its own that requires it and repeats every one of
# those replaces.
build_volcano() {
  local ver="$VOLCANO_VERSION" out="$cache/bin/volcano-$VOLCANO_VERSION"
  [ -x "$out/vc-scheduler" ] && [ -x "$out/vc-controller-manager" ] && [ -x "$out/vc-webhook-manager" ] && \
    [ -f "$out/crds/scheduling.volcano.sh_podgroups.yaml" ] && return 0
  local mod="$cache/src/volcano-$ver" src gomod apis
  mkdir -p "$mod" "$out"
  log "volcano $ver: resolving modules in $mod"
  src="$(module_dir volcano.sh/volcano "$ver")"
  gomod="$(go env GOMODCACHE)/cache/download/volcano.sh/volcano/@v/$ver.mod"
  if grep -v '^[[:space:]]*volcano.sh/apis =>' "$gomod" | grep -Eq '=> \.{1,2}/'; then
    log "volcano $ver: go.mod replaces a module with a local directory; cannot build it from the proxy"
    return 1
  fi
  apis="$(volcano_apis "$ver" "$gomod" "$mod")"
  {
    echo "module local/volcano-build"
    echo
    awk '$1 == "go" {print; exit}' "$gomod"
    echo
    echo "require volcano.sh/volcano $ver"
    echo
    echo "replace ("
    awk '/^replace \($/ {block = 1; next}
         block && /^\)/ {block = 0; next}
         block {print; next}
         /^replace / {sub(/^replace /, "\t"); print}' "$gomod" | grep -v '^[[:space:]]*volcano.sh/apis =>'
    [ -z "$apis" ] || printf '\tvolcano.sh/apis => %s\n' "$apis"
    echo ")"
  } >"$mod/go.mod"
  cat >"$mod/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/webhook-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
EOF
  (cd "$mod" && go mod tidy)
  local ldflags="-s -w -X volcano.sh/volcano/pkg/version.Version=$ver"
  ldflags+=" -X volcano.sh/volcano/pkg/version.GitSHA=$(module_commit volcano.sh/volcano "$ver")"
  local cmd pairs=()
  for cmd in scheduler controller-manager webhook-manager; do
    pairs+=("vc-$cmd=volcano.sh/volcano/cmd/$cmd")
  done
  (cd "$mod" && compile_commands "$out" "${pairs[@]}" -- -trimpath -ldflags "$ldflags")
  # The CRDs the scheduler and the job/queue/podgroup controllers use, plus the jobflow ones
  # (vc-controller-manager starts its jobflow and jobtemplate controllers by default).
  local bases="$src/config/crd/volcano/bases"
  [ -d "$bases" ] || bases="$src/installer/helm/chart/volcano/crd/bases"
  copy_crds "$out/crds" "$bases"/*.yaml
  if [ -d "$src/config/crd/jobflow/bases" ]; then
    copy_crds "$out/crds" "$src/config/crd/jobflow/bases"/*.yaml
  fi
}

# build_kueue: the Kueue manager, and in crds/ Kueue's CRDs plus those of the JobSet and MPIJob
# kinds Kueue integrates with (each from the module at the version Kueue's go.mod requires). From
# v0.15 Kueue serves v1beta1 and v1beta2 (stored from v0.17) and converts between them in its
# webhook server: the conversion patches its own kustomization enables (config/components/crd) go
# to conversion/, for the cluster to point at its Kueue. Its admission webhook configurations
# (config/components/webhook) go to webhooks/, likewise pointed at its Kueue by the cluster.
# `go install sigs.k8s.io/kueue/cmd/kueue@VERSION` would do, but it reads the module's version
# list (for deprecation notices) and the proxy here refuses that list (403); a wrapper module that
# requires only Kueue selects exactly Kueue's own dependency versions and needs no list.
build_kueue() {
  local ver="$KUEUE_VERSION" out="$cache/bin/kueue-$KUEUE_VERSION"
  [ -x "$out/kueue" ] && [ -f "$out/crds/kueue.x-k8s.io_clusterqueues.yaml" ] && \
    [ -f "$out/crds/jobset.x-k8s.io_jobsets.yaml" ] && \
    [ -f "$out/crds/kubeflow.org_mpijobs.yaml" ] && [ -d "$out/conversion" ] && \
    [ -f "$out/webhooks/manifests.yaml" ] && return 0
  local mod="$cache/src/kueue-$ver" src gomod dep want
  mkdir -p "$mod" "$out"
  log "kueue $ver: resolving modules in $mod"
  src="$(module_dir sigs.k8s.io/kueue "$ver")"
  gomod="$(go env GOMODCACHE)/cache/download/sigs.k8s.io/kueue/@v/$ver.mod"
  for dep in "sigs.k8s.io/jobset=$JOBSET_VERSION" "github.com/kubeflow/mpi-operator=$MPI_OPERATOR_VERSION"; do
    want="$(required_version "$gomod" "${dep%%=*}")"
    [ "$want" = "${dep#*=}" ] || \
      log "kueue $ver: warning: its go.mod requires ${dep%%=*} $want, versions.env has ${dep#*=}"
  done
  if [ ! -x "$out/kueue" ]; then
    {
      echo "module local/kueue-build"
      echo
      awk '$1 == "go" {print; exit}' "$gomod"
      echo
      echo "require sigs.k8s.io/kueue $ver"
    } >"$mod/go.mod"
    cat >"$mod/tools.go" <<'EOF'
//go:build tools

package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
EOF
    local ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$ver"
    ldflags+=" -X sigs.k8s.io/kueue/pkg/version.GitCommit=$(module_commit sigs.k8s.io/kueue "$ver")"
    log "kueue $ver: building kueue"
    on_build_list "$mod" kueue tidy_then go build -trimpath -ldflags "$ldflags" -o "$out/kueue.tmp" sigs.k8s.io/kueue/cmd/kueue
    mv "$out/kueue.tmp" "$out/kueue"
  fi
  copy_crds "$out/crds" "$src/config/components/crd/bases"/*.yaml
  local patch patches=()
  for patch in $(awk '$1 == "-" && $2 == "path:" && $3 ~ /^patches\/webhook_in_/ {print $3}' \
    "$src/config/components/crd/kustomization.yaml"); do
    patches+=("$src/config/components/crd/$patch")
  done
  mkdir -p "$out/conversion"
  [ "${#patches[@]}" -eq 0 ] || copy_crds "$out/conversion" "${patches[@]}"
  copy_crds "$out/webhooks" "$src/config/components/webhook/manifests.yaml"
  src="$(module_dir sigs.k8s.io/jobset "$JOBSET_VERSION")"
  copy_crds "$out/crds" "$src/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
  src="$(module_dir github.com/kubeflow/mpi-operator "$MPI_OPERATOR_VERSION")"
  copy_crds "$out/crds" "$src/manifests/base/kubeflow.org_mpijobs.yaml"
}

# build_helm: the helm client the chart's tests use (charts/trainer: lint, template, install).
# The k8sVersion variables are what helm's own Makefile sets from the client-go it requires: the
# Kubernetes version `helm template` and `helm lint` assume when no cluster is asked.
build_helm() {
  local ver="$HELM_VERSION" out="$cache/bin/helm-$HELM_VERSION"
  [ -x "$out/helm" ] && return 0
  local gomod client minor ldflags
  mkdir -p "$out"
  log "helm $ver: building"
  module_dir helm.sh/helm/v3 "$ver" >/dev/null
  gomod="$(go env GOMODCACHE)/cache/download/helm.sh/helm/v3/@v/$ver.mod"
  client="$(required_version "$gomod" k8s.io/client-go)"
  minor="${client#v0.}"
  minor="${minor%%.*}"
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$ver"
  ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor"
  ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
  GOBIN="$out" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$ver"
}

# list_module NAME: the directory of a module that requires, at the versions versions.env names, the components
# of one build list: "kubernetes" (Kubernetes, its staging modules at their published twins as build_kubernetes
# builds it, mpi-operator's controller and Prometheus) or "kueue" (Kueue and upstream Trainer, whose Kubernetes
# libraries are a minor release older: Kueue builds the scheduler framework of that release). What it selects
# (`go list -m all`) is, for each module any of them uses, the highest version any of them requires. Each of
# those components is built raised to it (on_build_list), its own module and the other components' (KEPT) at
# the versions it asks for; so are the peers' e2e suites, JobSet and Katib on the "kueue" list (their
# controller-runtime does not build on Kubernetes' newest client-go). The packages they share, Kubernetes'
# client libraries above all, then compile once in the build cache, where each would compile them again for
# each patch version of any module below them. Volcano (its go.mod pins Kubernetes' libraries of its own
# release), etcd (v3.5; Kubernetes requires the v3.7 modules), KWOK and helm keep their own build lists.
list_module() {
  local name="$1" dir="$cache/src/build-list-$1" kube staging
  mkdir -p "$dir"
  {
    printf 'module local/build-list-%s\n\ngo 1.24.0\n\nrequire (\n' "$name"
    case "$name" in
      kubernetes)
        printf '\t%s %s\n' k8s.io/kubernetes "$KUBERNETES_VERSION" github.com/kubeflow/mpi-operator \
          "$MPI_OPERATOR_VERSION" github.com/prometheus/prometheus "$PROMETHEUS_VERSION"
        kube="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBERNETES_VERSION.mod"
        [ -f "$kube" ] || module_dir k8s.io/kubernetes "$KUBERNETES_VERSION" >/dev/null
        staging="v0.${KUBERNETES_VERSION#v1.}"
        printf ')\n\nreplace (\n'
        grep -E '=> \./staging/src/' "$kube" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
        ;;
      kueue) printf '\t%s %s\n' sigs.k8s.io/kueue "$KUEUE_VERSION" github.com/kubeflow/trainer/v2 "$UPSTREAM_TRAINER_VERSION" ;;
      *) log "list_module: no build list named '$name'" && return 1 ;;
    esac
    printf ')\n'
  } >"$dir/go.mod.in"
  if ! cmp -s "$dir/go.mod.in" "$dir/go.mod.used"; then
    cp "$dir/go.mod.in" "$dir/go.mod"
    rm -f "$dir/go.sum"
    (cd "$dir" && GOFLAGS="$GOFLAGS -mod=mod" go list -m all >/dev/null)
    cp "$dir/go.mod.in" "$dir/go.mod.used"
  fi
  printf '%s\n' "$dir"
}

# The components' own modules: raise_to never moves one of them (a component built beside another keeps the
# version of the other that it asks for, say the Trainer API Kueue's integration was written against).
KEPT=(sigs.k8s.io/kueue github.com/kubeflow/trainer/v2 sigs.k8s.io/jobset github.com/kubeflow/mpi-operator
  github.com/prometheus/prometheus github.com/kubeflow/katib volcano.sh/volcano volcano.sh/apis)

# raise_to FLOORS DIR: require in DIR's go.mod each module the module in directory FLOORS selects, at that
# version (a module FLOORS replaces by the same path at another version: that version), but DIR's own module
# and KEPT: for each module both use, DIR's build then selects the higher of the two versions.
raise_to() {
  local floors="$1" dir="$2" own required
  own="$(awk '$1 == "module" {print $2; exit}' "$dir/go.mod")"
  required="$(cd "$floors" && GOFLAGS="$GOFLAGS -mod=mod" go list -m -f \
    '{{if not .Main}}{{with .Replace}}{{if eq .Path $.Path}}{{$.Path}}@{{.Version}}{{end}}{{else}}{{.Path}}@{{.Version}}{{end}}{{end}}' all |
    awk -v own="$own" -v kept="${KEPT[*]}" 'BEGIN {n = split(kept, k, " "); for (i = 1; i <= n; i++) keep[k[i]] = 1; keep[own] = 1}
      NF {split($0, m, "@"); if (!(m[1] in keep)) print "-require=" $0}')"
  # shellcheck disable=SC2086 # one -require flag per word
  (cd "$dir" && go mod edit $required)
}

# on_build_list DIR LIST COMMAND...: run COMMAND (a build) in DIR with DIR's module raised to the build list
# LIST (list_module, raise_to). When it fails there, DIR's go.mod and go.sum are put back and COMMAND runs on
# the module's own versions.
on_build_list() {
  local dir="$1" list="$2"
  shift 2
  cp "$dir/go.mod" "$dir/go.mod.own"
  if [ -f "$dir/go.sum" ]; then cp "$dir/go.sum" "$dir/go.sum.own"; else rm -f "$dir/go.sum.own"; fi
  if raise_to "$(list_module "$list")" "$dir" && (cd "$dir" && "$@"); then
    rm -f "$dir/go.mod.own" "$dir/go.sum.own"
    return 0
  fi
  log "$(basename "$dir"): does not build on the $list build list; building on its own versions"
  mv "$dir/go.mod.own" "$dir/go.mod"
  if [ -f "$dir/go.sum.own" ]; then mv "$dir/go.sum.own" "$dir/go.sum"; else rm -f "$dir/go.sum"; fi
  (cd "$dir" && "$@")
}

# tidy_then COMMAND...: `go mod tidy`, then COMMAND (for a wrapper module raised to the build list).
tidy_then() { go mod tidy && "$@"; }

# mod_mod COMMAND...: COMMAND with -mod=mod, for a copy of an upstream module whose go.mod a build may complete.
mod_mod() { GOFLAGS="$GOFLAGS -mod=mod" "$@"; }

# wrapper_module DIR MODULE VERSION PACKAGE [FLOORS]: write in DIR a wrapper module that requires only
# MODULE and imports PACKAGE: MODULE's own dependency versions, and no version list read from the proxy
# (which refuses lists here). With FLOORS (a module's directory, say list_module's), it is raised to what
# FLOORS selects (raise_to: MODULE kept at VERSION), so each module both use is at the same version (the
# higher of the two) and their shared packages compile once in the build cache.
wrapper_module() {
  local dir="$1" module="$2" ver="$3" pkg="$4" floors="${5:-}"
  local name
  name="$(basename "$dir")"
  module_dir "$module" "$ver" >/dev/null
  mkdir -p "$dir"
  {
    echo "module local/$name-build"
    echo
    awk '$1 == "go" {print; exit}' "$(go env GOMODCACHE)/cache/download/$module/@v/$ver.mod"
    echo
    echo "require $module $ver"
  } >"$dir/go.mod"
  rm -f "$dir/go.sum"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$dir/tools.go"
  [ -z "$floors" ] || raise_to "$floors" "$dir"
  (cd "$dir" && go mod tidy)
}

# wrapper_build DIR MODULE VERSION PACKAGE OUT [FLOORS]: build PACKAGE of MODULE@VERSION into OUT (unless
# it exists) through the wrapper module in DIR (wrapper_module, FLOORS included). When it does not
# build on FLOORS' versions, it is built on MODULE's own.
wrapper_build() {
  local dir="$1" module="$2" ver="$3" pkg="$4" out="$5" floors="${6:-}"
  [ -x "$out" ] && return 0
  wrapper_module "$dir" "$module" "$ver" "$pkg" "$floors"
  log "$module $ver: building $(basename "$out")${floors:+ on the versions of $(basename "$floors")}"
  if ! (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out.tmp" "$pkg"); then
    [ -n "$floors" ] || return 1
    log "$module $ver: does not build on the versions of $floors; building on its own"
    wrapper_module "$dir" "$module" "$ver" "$pkg"
    (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out.tmp" "$pkg")
  fi
  mv "$out.tmp" "$out"
}

# build_upstream: upstream Kubeflow Trainer's controller manager (UPSTREAM_TRAINER_VERSION) and the
# JobSet controller (its main package) at the version Trainer's go.mod requires, for the bench's
# upstream side (bench/upstream.py); in crds/ the CRDs of both, in runtimes/ Trainer's
# ClusterTrainingRuntimes, in webhooks/ Trainer's and JobSet's admission webhook configurations.
build_upstream() {
  local ver="$UPSTREAM_TRAINER_VERSION" out="$cache/bin/upstream-$UPSTREAM_TRAINER_VERSION"
  [ -x "$out/trainer-controller-manager" ] && [ -x "$out/jobset-controller" ] && \
    [ -f "$out/crds/trainer.kubeflow.org_trainjobs.yaml" ] && [ -f "$out/crds/jobset.x-k8s.io_jobsets.yaml" ] && \
    [ -f "$out/runtimes/torch_distributed.yaml" ] && [ -f "$out/webhooks/jobset.yaml" ] && return 0
  local mod="$cache/src/upstream-$ver" src gomod jobset jsrc
  mkdir -p "$out"
  log "upstream trainer $ver: resolving modules in $mod"
  src="$(module_dir github.com/kubeflow/trainer/v2 "$ver")"
  gomod="$(go env GOMODCACHE)/cache/download/github.com/kubeflow/trainer/v2/@v/$ver.mod"
  jobset="$(required_version "$gomod" sigs.k8s.io/jobset)"
  jsrc="$(module_dir sigs.k8s.io/jobset "$jobset")"
  wrapper_build "$mod/trainer" github.com/kubeflow/trainer/v2 "$ver" \
    github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager "$out/trainer-controller-manager" "$(list_module kueue)"
  wrapper_build "$mod/jobset" sigs.k8s.io/jobset "$jobset" sigs.k8s.io/jobset "$out/jobset-controller" \
    "$(list_module kueue)"
  copy_crds "$out/crds" "$src/manifests/base/crds"/trainer.kubeflow.org_*.yaml \
    "$jsrc/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
  copy_crds "$out/runtimes" "$src/manifests/base/runtimes"/*.yaml
  mkdir -p "$out/webhooks"
  install -m 0644 "$src/manifests/base/webhook/manifests.yaml" "$out/webhooks/trainer.yaml"
  install -m 0644 "$jsrc/config/components/webhook/manifests.yaml" "$out/webhooks/jobset.yaml"
  printf '%s\n' "$jobset" >"$out/JOBSET_VERSION"
}

# build_mpi_operator: kubeflow/mpi-operator's controller (MPI_OPERATOR_VERSION) and its MPIJob CRD in
# crds/, for the migration test (e2e/test_mpijob_migration.py: MPIJobs it started, handed to this operator).
build_mpi_operator() {
  local ver="$MPI_OPERATOR_VERSION" out="$cache/bin/mpi_operator-$MPI_OPERATOR_VERSION"
  [ -x "$out/mpi-operator" ] && [ -f "$out/crds/kubeflow.org_mpijobs.yaml" ] && return 0
  local src
  mkdir -p "$out"
  log "mpi-operator $ver: resolving modules"
  src="$(module_dir github.com/kubeflow/mpi-operator "$ver")"
  wrapper_build "$cache/src/mpi_operator-$ver" github.com/kubeflow/mpi-operator "$ver" \
    github.com/kubeflow/mpi-operator/cmd/mpi-operator "$out/mpi-operator" "$(list_module kubernetes)"
  copy_crds "$out/crds" "$src/manifests/base/kubeflow.org_mpijobs.yaml"
}

# build_prometheus: the Prometheus server and promtool (PROMETHEUS_VERSION, Prometheus v3 published as
# module github.com/prometheus/prometheus v0.3XY.Z), for the chart's rules (tests/tooling/test_prometheus_rules.py
# runs `promtool test rules`) and e2e/test_observability_real.py (a real Prometheus scraping the operator).
# Built in a writable copy of the module (its own go.mod and go.sum, GOWORK=off: the zip's go.work
# names directories it leaves out), with the remove_all_sd tag: only static scrape targets, none of
# the cloud service discoveries' dependencies. No web UI assets: the HTTP API is all the tests use.
build_prometheus() {
  local ver="$PROMETHEUS_VERSION" out="$cache/bin/prometheus-$PROMETHEUS_VERSION"
  [ -x "$out/prometheus" ] && [ -x "$out/promtool" ] && return 0
  local mod="$cache/src/prometheus-$ver" src release ldflags
  mkdir -p "$out"
  log "prometheus $ver: resolving modules"
  src="$(module_dir github.com/prometheus/prometheus "$ver")"
  rm -rf "$mod"
  cp -R "$src" "$mod"
  chmod -R u+w "$mod"
  release="$(cat "$mod/VERSION")"
  ldflags="-s -w -X github.com/prometheus/common/version.Version=$release"
  ldflags+=" -X github.com/prometheus/common/version.Branch=HEAD"
  log "prometheus $ver ($release)"
  (export GOWORK=off && on_build_list "$mod" kubernetes mod_mod compile_commands "$out" prometheus=./cmd/prometheus \
    promtool=./cmd/promtool -- -trimpath -tags remove_all_sd -ldflags "$ldflags")
}

# build_trainer_e2e: Kubeflow Trainer's own end-to-end suite (test/e2e, ginkgo) compiled as a test
# binary, with the runtimes its setup (hack/e2e-setup-cluster.sh) installs: the kustomization
# manifests/base/runtimes in runtimes/ (for `kubectl apply -k`) and examples/flux in flux/; and in
# crds/ the JobSet CRD of the version Trainer's go.mod requires. The module zip is read-only: it is
# copied to a writable directory first, and GOFLAGS=-mod=mod lets go resolve the test-only
# dependencies from the proxy. The suite is run as published (e2e/test_upstream_e2e.py), never edited.
build_trainer_e2e() {
  local ver="$UPSTREAM_TRAINER_VERSION" out="$cache/bin/trainer_e2e-$UPSTREAM_TRAINER_VERSION"
  [ -x "$out/e2e.test" ] && [ -f "$out/runtimes/kustomization.yaml" ] && [ -f "$out/flux/flux-runtime.yaml" ] && \
    [ -f "$out/crds/jobset.x-k8s.io_jobsets.yaml" ] && return 0
  local mod="$cache/src/trainer_e2e-$ver" src
  mkdir -p "$out"
  log "trainer e2e $ver: resolving modules"
  src="$(module_dir github.com/kubeflow/trainer/v2 "$ver")"
  rm -rf "$mod"
  cp -R "$src" "$mod"
  chmod -R u+w "$mod"
  log "trainer e2e $ver: building e2e.test"
  on_build_list "$mod" kueue mod_mod go test -c -trimpath -o "$out/e2e.test.tmp" ./test/e2e
  mv "$out/e2e.test.tmp" "$out/e2e.test"
  rm -rf "$out/runtimes" "$out/flux"
  cp -R "$src/manifests/base/runtimes" "$out/runtimes"
  chmod -R u+w "$out/runtimes"
  copy_crds "$out/flux" "$src/examples/flux/flux-runtime.yaml"
  # The suite reads JobSets (expecting NotFound): the JobSet CRD of the version Trainer requires.
  local jobset
  jobset="$(module_dir sigs.k8s.io/jobset "$(required_version "$src/go.mod" sigs.k8s.io/jobset)")"
  copy_crds "$out/crds" "$jobset/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
}

# build_mpi_operator_e2e: kubeflow/mpi-operator's own end-to-end suite (test/e2e of MPI_OPERATOR_VERSION,
# ginkgo) compiled as a test binary, run as published against this operator's MPIJob
# (e2e/test_mpi_operator_e2e.py), never edited. Built like trainer_e2e: the read-only module copied
# to a writable directory, its test-only dependencies resolved from the proxy.
build_mpi_operator_e2e() {
  local ver="$MPI_OPERATOR_VERSION" out="$cache/bin/mpi_operator_e2e-$MPI_OPERATOR_VERSION"
  [ -x "$out/mpi-operator-e2e.test" ] && return 0
  local mod="$cache/src/mpi_operator_e2e-$ver" src
  mkdir -p "$out"
  log "mpi-operator e2e $ver: resolving modules"
  src="$(module_dir github.com/kubeflow/mpi-operator "$ver")"
  rm -rf "$mod"
  cp -R "$src" "$mod"
  chmod -R u+w "$mod"
  log "mpi-operator e2e $ver: building mpi-operator-e2e.test"
  on_build_list "$mod" kueue mod_mod go test -c -trimpath -o "$out/mpi-operator-e2e.test.tmp" ./test/e2e
  mv "$out/mpi-operator-e2e.test.tmp" "$out/mpi-operator-e2e.test"
}

# build_kueue_e2e: Kueue's own extended end-to-end suites (test/e2e/singlecluster/extended and
# test/e2e/tas/extended of KUEUE_VERSION, ginkgo v2) compiled as test binaries, run as published against
# this operator's TrainJob and MPIJob (e2e/test_kueue_e2e.py), never edited. Built like trainer_e2e: the
# read-only module copied to a writable directory, its test-only dependencies resolved from the proxy.
# The suites read images from the module's hack/testing/*/Dockerfile, and the cluster is set up from its
# kustomizations (test/e2e/config/extended): the copy stays for them. Beside them, what the suites wait
# for of JobSet at the version Kueue's go.mod requires: its manager (JobSet's main package) and its
# kustomizations in jobset-config/ (config/default).
build_kueue_e2e() {
  local ver="$KUEUE_VERSION" out="$cache/bin/kueue_e2e-$KUEUE_VERSION"
  [ -x "$out/singlecluster-extended.test" ] && [ -x "$out/tas-extended.test" ] && [ -x "$out/jobset-manager" ] && \
    [ -f "$out/jobset-config/default/kustomization.yaml" ] && return 0
  local mod="$cache/src/kueue_e2e-$ver" src suite jobset jsrc
  mkdir -p "$out"
  log "kueue e2e $ver: resolving modules"
  src="$(module_dir sigs.k8s.io/kueue "$ver")"
  if [ ! -x "$out/singlecluster-extended.test" ] || [ ! -x "$out/tas-extended.test" ] || [ ! -d "$mod" ]; then
    rm -rf "$mod"
    cp -R "$src" "$mod"
    chmod -R u+w "$mod"
    log "kueue e2e $ver: building singlecluster-extended.test and tas-extended.test"
    on_build_list "$mod" kueue mod_mod kueue_suites "$out"
  fi
  jobset="$(required_version "$(go env GOMODCACHE)/cache/download/sigs.k8s.io/kueue/@v/$ver.mod" sigs.k8s.io/jobset)"
  jsrc="$(module_dir sigs.k8s.io/jobset "$jobset")"
  wrapper_build "$cache/src/kueue_e2e_jobset-$jobset" sigs.k8s.io/jobset "$jobset" sigs.k8s.io/jobset \
    "$out/jobset-manager" "$(list_module kueue)"
  rm -rf "$out/jobset-config"
  cp -R "$jsrc/config" "$out/jobset-config"
  chmod -R u+w "$out/jobset-config"
  printf '%s\n' "$jobset" >"$out/JOBSET_VERSION"
}

# kueue_suites OUT: Kueue's two extended e2e suites compiled (in Kueue's module) into OUT.
kueue_suites() {
  local suite
  for suite in singlecluster tas; do
    go test -c -trimpath -o "$1/$suite-extended.test.tmp" "./test/e2e/$suite/extended" || return 1
    mv "$1/$suite-extended.test.tmp" "$1/$suite-extended.test"
  done
}

# build_katib: Katib (KATIB_VERSION), as its images hold it: the controller, the DB manager, the file
# metrics collector (Katib's StdOut and File collectors) and the Goptuna suggestion service, built from
# one wrapper module that requires only Katib (Katib's own dependency versions); beside them its
# kustomizations (manifests/v1beta1) in manifests/, for e2e/test_katib.py to install Katib as its
# `katib-external-db` install does. Katib's Python suggestion services are not Go and are not built.
build_katib() {
  local ver="$KATIB_VERSION" out="$cache/bin/katib-$KATIB_VERSION"
  local cmds=(katib-controller:cmd/katib-controller/v1beta1 katib-db-manager:cmd/db-manager/v1beta1
    file-metricscollector:cmd/metricscollector/v1beta1/file-metricscollector
    goptuna-suggestion:cmd/suggestion/goptuna/v1beta1)
  local cmd missing=()
  for cmd in "${cmds[@]}"; do [ -x "$out/${cmd%%:*}" ] || missing+=("$cmd"); done
  [ "${#missing[@]}" -eq 0 ] && [ -f "$out/manifests/installs/katib-external-db/kustomization.yaml" ] && return 0
  local mod="$cache/src/katib-$ver" src gomod
  mkdir -p "$mod" "$out"
  log "katib $ver: resolving modules in $mod"
  src="$(module_dir github.com/kubeflow/katib "$ver")"
  gomod="$(go env GOMODCACHE)/cache/download/github.com/kubeflow/katib/@v/$ver.mod"
  if [ "${#missing[@]}" -gt 0 ]; then
    {
      echo "module local/katib-build"
      echo
      awk '$1 == "go" {print; exit}' "$gomod"
      echo
      echo "require github.com/kubeflow/katib $ver"
    } >"$mod/go.mod"
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      for cmd in "${cmds[@]}"; do printf '\t_ "github.com/kubeflow/katib/%s"\n' "${cmd#*:}"; done
      printf ')\n'
    } >"$mod/tools.go"
    log "katib $ver: building ${missing[*]%%:*}"
    on_build_list "$mod" kueue tidy_then katib_commands "$out" "${missing[@]}"
  fi
  rm -rf "$out/manifests"
  cp -R "$src/manifests/v1beta1" "$out/manifests"
  chmod -R u+w "$out/manifests"
}

# katib_commands OUT NAME:PATH...: each Katib command (github.com/kubeflow/katib/PATH) built into OUT/NAME, one
# `go build` each (three of the four packages are named v1beta1, so one build would name them alike).
katib_commands() {
  local out="$1" cmd
  shift
  for cmd in "$@"; do
    go build -trimpath -ldflags "-s -w" -o "$out/${cmd%%:*}.tmp" "github.com/kubeflow/katib/${cmd#*:}" || return 1
    mv "$out/${cmd%%:*}.tmp" "$out/${cmd%%:*}"
  done
}

# Sourced (tests/tooling/test_wrapper_module.py), it only defines the functions above.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

fetch=false
[ "${1:-}" = "--fetch" ] && fetch=true && shift
components=(etcd kwok kubernetes volcano kueue helm trainer_e2e)
[ "$#" -gt 0 ] && components=("$@")
for component in "${components[@]}"; do
  if ! declare -F "build_$component" >/dev/null; then
    log "unknown component '$component'; known: etcd kwok kubernetes volcano kueue helm trainer_e2e upstream mpi_operator mpi_operator_e2e kueue_e2e prometheus katib"
    exit 2
  fi
done
if $fetch; then
  fetch_only "${components[@]}"
  exit 0
fi
# One build at a time per cache: two runs (say a test's and a person's) would race on the same files.
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock -n 9 || { log "waiting for another localcluster/build.sh run to finish"; flock 9; }

for component in "${components[@]}"; do
  start=$SECONDS
  "build_$component"
  log "$component: ready ($((SECONDS - start))s)"
done
echo "$cache/bin"
