#!/usr/bin/env bash
# llmd-epp.sh builds llm-d's endpoint picker (cmd/epp of an llm-d-router
# checkout, given as $1 or LLMD_SRC) without cgo into the cache outside the
# repository, ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llmd-epp-<commit>/, and
# prints the binary's path as its last line. <commit> is the checkout's git
# HEAD, or a hash of its go.mod, go.sum and Go files when it is not a git
# checkout. Idempotent: a cached binary is reused. The module is not on the
# Go module proxy, but its dependencies are; the first build takes about five
# minutes on two cores and writes a ~105 MB binary.
set -euo pipefail
SRC="${1:-${LLMD_SRC:-}}"
if [ -z "$SRC" ] || [ ! -f "$SRC/go.mod" ] || [ ! -d "$SRC/cmd/epp" ]; then
	echo "llmd-epp.sh: LLMD_SRC must name an llm-d-router checkout (with go.mod and cmd/epp), got '${SRC}'" >&2
	exit 2
fi
SRC="$(cd "$SRC" && pwd)"
if commit="$(git -C "$SRC" rev-parse --verify -q HEAD 2>/dev/null)" && [ -z "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	version="${commit:0:12}"
else
	version="src-$(cd "$SRC" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)"
fi
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llmd-epp-$version"
if [ ! -x "$OUT/llmd-epp" ]; then
	echo "llmd-epp.sh: building $SRC/cmd/epp into $OUT (several minutes)" >&2
	mkdir -p "$OUT"
	GO="${GO:-go}"
	(cd "$SRC" && "$GO" mod download && CGO_ENABLED=0 "$GO" build -o "$OUT/llmd-epp.tmp" ./cmd/epp) >&2
	mv "$OUT/llmd-epp.tmp" "$OUT/llmd-epp"
fi
echo "$OUT/llmd-epp"
