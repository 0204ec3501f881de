#!/usr/bin/env bash
# jaeger.sh builds Jaeger v2 (one binary: OTLP receiver, in-memory storage,
# query API and UI) from the Go module proxy with the tools module in
# tools/jaeger, caches it outside the repository at
# ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/jaeger-<version>/jaeger and prints
# the binary's path as its last line. The first build takes about 10+ minutes
# on 2 cores; afterwards this is instant. Needs only Go and the module proxy.
set -euo pipefail
VERSION=v1.76.0
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/jaeger-$VERSION"
BIN="$DIR/jaeger"
GO="${GO:-go}"
if [ ! -x "$BIN" ]; then
	mkdir -p "$DIR"
	echo "jaeger.sh: building github.com/jaegertracing/jaeger/cmd/jaeger@$VERSION into $DIR (slow the first time)" >&2
	start=$(date +%s)
	# Build from the tools module (pinned in tools/jaeger/go.mod and go.sum)
	# so the main module does not carry Jaeger's dependencies.
	(cd "$ROOT/tools/jaeger" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" "$GO" build -trimpath -o "$BIN.tmp" github.com/jaegertracing/jaeger/cmd/jaeger) >&2
	mv "$BIN.tmp" "$BIN"
	echo "jaeger.sh: built in $(( $(date +%s) - start ))s" >&2
fi
"$BIN" version >/dev/null 2>&1 || { echo "jaeger.sh: $BIN does not run" >&2; exit 1; }
echo "$BIN"
