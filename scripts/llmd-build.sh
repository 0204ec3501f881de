#!/usr/bin/env bash
# llmd-build.sh SRC CMD NAME LABEL builds one command of an llm-d-router
# checkout (SRC/CMD, e.g. cmd/epp) without cgo into the cache outside the
# repository, ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/LABEL-<commit>/NAME, and
# prints the binary's path as its last line. <commit> is the checkout's git
# HEAD, or a hash of its go.mod, go.sum and Go files when it is not a clean
# git checkout. Idempotent: a cached binary is reused. The module is not on
# the Go module proxy, but its dependencies are. Called by llmd-epp.sh and
# llmd-sidecar.sh, which say what they build.
set -euo pipefail
SRC="$1" CMD="$2" NAME="$3" LABEL="$4"
if [ -z "$SRC" ] || [ ! -f "$SRC/go.mod" ] || [ ! -d "$SRC/$CMD" ]; then
	echo "$LABEL: LLMD_SRC must name an llm-d-router checkout (with go.mod and $CMD), got '${SRC}'" >&2
	exit 2
fi
SRC="$(cd "$SRC" && pwd)"
if commit="$(git -C "$SRC" rev-parse --verify -q HEAD 2>/dev/null)" && [ -z "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	version="${commit:0:12}"
else
	version="src-$(cd "$SRC" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)"
fi
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/$LABEL-$version"
if [ ! -x "$OUT/$NAME" ]; then
	echo "$LABEL: building $SRC/$CMD into $OUT (several minutes)" >&2
	mkdir -p "$OUT"
	GO="${GO:-go}"
	(cd "$SRC" && "$GO" mod download && CGO_ENABLED=0 "$GO" build -o "$OUT/$NAME.tmp" "./$CMD") >&2
	mv "$OUT/$NAME.tmp" "$OUT/$NAME"
fi
echo "$OUT/$NAME"
