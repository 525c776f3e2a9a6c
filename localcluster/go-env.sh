# The Go environment of every build of the local cluster (sourced by build.sh and realnode/build.sh: one
# set of flags, so the packages their builds share compile once). Every binary is linked with -s -w (no
# symbol table, no DWARF), so the compiler's DWARF would be thrown away: -dwarf=false makes none
# (docs/development.md has the figures).
# shellcheck shell=bash
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false" CGO_ENABLED=0
