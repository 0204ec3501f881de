#!/usr/bin/env bash
# llmd-sim.sh builds llm-d's vLLM simulator (cmd/llm-d-inference-sim of an
# llm-d-inference-sim checkout, given as $1 or LLMD_SIM_SRC) without cgo into
# the cache outside the repository,
# ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llmd-sim-<commit>/llm-d-inference-sim,
# and prints the binary's path as its last line. The simulator's go.mod
# requires github.com/llm-d/llm-d-router, which the Go module proxy does not
# serve, so the build runs in a copy of the checkout whose go.mod gets
# `replace github.com/llm-d/llm-d-router => <LLMD_SRC>` (an llm-d-router
# checkout, $2 or LLMD_SRC) and a `go mod tidy`. Neither checkout is edited.
# <commit> is the simulator checkout's git HEAD plus the router's (or a hash
# of their Go sources when they are not clean git checkouts). Idempotent: a
# cached binary is reused. The first build downloads for about four minutes
# and compiles for a few more on two cores; the binary is ~90 MB.
set -euo pipefail
SIM="${1:-${LLMD_SIM_SRC:-}}"
ROUTER="${2:-${LLMD_SRC:-}}"
if [ -z "$SIM" ] || [ ! -f "$SIM/go.mod" ] || [ ! -d "$SIM/cmd/llm-d-inference-sim" ]; then
	echo "llmd-sim.sh: LLMD_SIM_SRC must name an llm-d-inference-sim checkout (with go.mod and cmd/llm-d-inference-sim), got '${SIM}'" >&2
	exit 2
fi
if [ -z "$ROUTER" ] || [ ! -f "$ROUTER/go.mod" ]; then
	echo "llmd-sim.sh: LLMD_SRC must name an llm-d-router checkout (its go.mod replaces the module the simulator requires), got '${ROUTER}'" >&2
	exit 2
fi
SIM="$(cd "$SIM" && pwd)"
ROUTER="$(cd "$ROUTER" && pwd)"
version_of() {
	local src="$1" commit
	if commit="$(git -C "$src" rev-parse --verify -q HEAD 2>/dev/null)" && [ -z "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
		echo "${commit:0:12}"
	else
		echo "src-$(cd "$src" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)"
	fi
}
version="$(version_of "$SIM")-$(version_of "$ROUTER")"
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llmd-sim-$version"
BIN="$OUT/llm-d-inference-sim"
if [ ! -x "$BIN" ]; then
	echo "llmd-sim.sh: building $SIM/cmd/llm-d-inference-sim into $OUT (several minutes)" >&2
	mkdir -p "$OUT"
	WORK="$OUT/src"
	rm -rf "$WORK"
	mkdir -p "$WORK"
	# a copy: git archive when it is a clean checkout, else the files themselves
	if git -C "$SIM" rev-parse --verify -q HEAD >/dev/null 2>&1 && [ -z "$(git -C "$SIM" status --porcelain --untracked-files=no)" ]; then
		git -C "$SIM" archive HEAD | tar -x -C "$WORK"
	else
		(cd "$SIM" && tar --exclude=.git -cf - .) | tar -x -C "$WORK"
	fi
	GO="${GO:-go}"
	(
		cd "$WORK"
		"$GO" mod edit -replace "github.com/llm-d/llm-d-router=$ROUTER"
		"$GO" mod tidy
		CGO_ENABLED=0 "$GO" build -o "$BIN.tmp" ./cmd/llm-d-inference-sim
	) >&2
	mv "$BIN.tmp" "$BIN"
	rm -rf "$WORK"
fi
echo "$BIN"
