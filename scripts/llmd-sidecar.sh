#!/usr/bin/env bash
# llmd-sidecar.sh builds llm-d's prefill/decode routing sidecar (cmd/pd-sidecar
# of an llm-d-router checkout, given as $1 or LLMD_SRC) without cgo into the
# cache outside the repository,
# ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llmd-sidecar-<commit>/pd-sidecar, and
# prints the binary's path as its last line (scripts/llmd-build.sh; its
# dependencies are llmd-epp.sh's: a machine that built llm-d's picker has
# them). The sidecar runs beside a decode instance: it reads the
# x-prefiller-host-port header the router sets, sends the prompt to that
# prefill instance first and then decodes locally with the kv_transfer_params
# the prefill answered.
set -euo pipefail
exec bash "$(dirname "$0")/llmd-build.sh" "${1:-${LLMD_SRC:-}}" cmd/pd-sidecar pd-sidecar llmd-sidecar
