#!/usr/bin/env bash
# llmd-sidecar.sh builds llm-d's prefill/decode routing sidecar (cmd/pd-sidecar
# of an llm-d-router checkout, given as $1 or LLMD_SRC) without cgo into the
# cache outside the repository,
# ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llmd-sidecar-<commit>/pd-sidecar, and
# prints the binary's path as its last line. <commit> is the checkout's git
# HEAD, or a hash of its go.mod, go.sum and Go files when it is not a clean
# git checkout. Idempotent: a cached binary is reused. The module is not on the
# Go module proxy, but its dependencies are (the same ones as llmd-epp.sh's:
# a machine that built llm-d's picker has them). The sidecar runs beside a
# decode instance: it reads the x-prefiller-host-port header the router sets,
# sends the prompt to that prefill instance first and then decodes locally
# with the kv_transfer_params the prefill answered.
set -euo pipefail
SRC="${1:-${LLMD_SRC:-}}"
if [ -z "$SRC" ] || [ ! -f "$SRC/go.mod" ] || [ ! -d "$SRC/cmd/pd-sidecar" ]; then
	echo "llmd-sidecar.sh: LLMD_SRC must name an llm-d-router checkout (with go.mod and cmd/pd-sidecar), got '${SRC}'" >&2
	exit 2
fi
SRC="$(cd "$SRC" && pwd)"
if commit="$(git -C "$SRC" rev-parse --verify -q HEAD 2>/dev/null)" && [ -z "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	version="${commit:0:12}"
else
	version="src-$(cd "$SRC" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)"
fi
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llmd-sidecar-$version"
if [ ! -x "$OUT/pd-sidecar" ]; then
	echo "llmd-sidecar.sh: building $SRC/cmd/pd-sidecar into $OUT" >&2
	mkdir -p "$OUT"
	GO="${GO:-go}"
	(cd "$SRC" && "$GO" mod download && CGO_ENABLED=0 "$GO" build -o "$OUT/pd-sidecar.tmp" ./cmd/pd-sidecar) >&2
	mv "$OUT/pd-sidecar.tmp" "$OUT/pd-sidecar"
fi
echo "$OUT/pd-sidecar"
