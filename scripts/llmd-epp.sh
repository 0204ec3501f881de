#!/usr/bin/env bash
# llmd-epp.sh builds llm-d's endpoint picker (cmd/epp of an llm-d-router
# checkout, given as $1 or LLMD_SRC) without cgo into the cache outside the
# repository, ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llmd-epp-<commit>/llmd-epp,
# and prints the binary's path as its last line (scripts/llmd-build.sh). The
# first build takes about five minutes on two cores and writes a ~105 MB
# binary.
set -euo pipefail
exec bash "$(dirname "$0")/llmd-build.sh" "${1:-${LLMD_SRC:-}}" cmd/epp llmd-epp llmd-epp
