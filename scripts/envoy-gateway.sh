#!/usr/bin/env bash
# envoy-gateway.sh builds Envoy Gateway's control plane (`envoy-gateway`,
# module github.com/envoyproxy/gateway) from the Go module proxy with
# `go install <pkg>@<version>` (the module's own go.mod and go.sum, nothing
# added to ours), caches it outside the repository at
# ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/envoy-gateway-<version>/envoy-gateway
# and prints the binary's path as its last line. Without cgo. The first
# build is long (Kubernetes and Envoy API modules; see docs/testing.md for
# the time measured); afterwards this is instant. Needs only Go and the
# module proxy; it does not fetch Envoy: examples/envoy-gateway/ points the
# Host provider at the Envoy of scripts/envoy.sh.
set -euo pipefail
VERSION=v1.9.1
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/envoy-gateway-$VERSION"
BIN="$DIR/envoy-gateway"
GO="${GO:-go}"
if [ ! -x "$BIN" ]; then
	mkdir -p "$DIR"
	echo "envoy-gateway.sh: building github.com/envoyproxy/gateway/cmd/envoy-gateway@$VERSION into $DIR (slow the first time)" >&2
	start=$(date +%s)
	tmp=$(mktemp -d "$DIR/build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# Outside any module (a scratch working directory), so the build uses
	# Envoy Gateway's own go.mod and go.sum and no workspace of ours.
	(cd "$tmp" && GOWORK=off GOBIN="$tmp" CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
		"$GO" install -trimpath "github.com/envoyproxy/gateway/cmd/envoy-gateway@$VERSION") >&2
	mv "$tmp/envoy-gateway" "$BIN"
	echo "envoy-gateway.sh: built in $(( $(date +%s) - start ))s" >&2
fi
"$BIN" version >/dev/null 2>&1 || { echo "envoy-gateway.sh: $BIN does not run" >&2; exit 1; }
echo "$BIN"
