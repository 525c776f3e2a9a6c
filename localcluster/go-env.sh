# The Go environment of every build of the local cluster (sourced by build.sh and realnode/build.sh: one
# set of flags, so the packages their builds share compile once). Every binary is linked with -s -w (no
# symbol table, no DWARF), so the compiler's DWARF would be thrown away: -dwarf=false makes none
# (docs/development.md has the figures).
# shellcheck shell=bash
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false" CGO_ENABLED=0

# fetch_only COMPONENT...: download into the module cache every module the builds of COMPONENT... need,
# compiling nothing (`build.sh --fetch`), so that a build started later only compiles; network-bound, it
# runs beside a compile-bound build. Each build_COMPONENT runs in a subshell against a scratch cache
# (a directory of its own: nothing it writes meets a real build's), with its `go build`, `go install`
# and `go test` as dry runs (-n): they load every package, and so download every module, but run no
# compiler. Its errors are ignored (a binary a dry run did not make, a module not served): the build
# after it meets them again and reports them.
fetch_only() {
  local scratch component start
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/trainer-fetch.XXXXXX")"
  for component in "$@"; do
    start=$SECONDS
    (
      cache="$scratch/$component"
      go() {
        case "$1" in
          build | install | test) command go "$1" -n "${@:2}" ;;
          *) command go "$@" ;;
        esac
      }
      set +e
      "build_$component"
    ) >/dev/null 2>&1 || true
    log "$component: modules fetched ($((SECONDS - start))s)"
  done
  chmod -R u+w "$scratch"
  rm -rf "$scratch"
}
