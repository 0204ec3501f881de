#!/usr/bin/env bash
# staticcheck.sh installs staticcheck (honnef.co/go/tools, from the Go module
# proxy) into ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/staticcheck-$VERSION/bin,
# outside the repository, when it is not there yet, and prints the binary's
# path as its last line. Idempotent and fast once installed. Needs go and
# access to the Go module proxy.
set -euo pipefail
VERSION=0.8.2
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/staticcheck-$VERSION/bin"
GO=${GO:-go}
if [ ! -x "$DIR/staticcheck" ]; then
	echo "staticcheck.sh: installing honnef.co/go/tools/cmd/staticcheck@v$VERSION into $DIR" >&2
	mkdir -p "$DIR"
	# install pkg@version builds outside this module: go.mod and go.sum are left alone.
	GOBIN="$DIR" "$GO" install "honnef.co/go/tools/cmd/staticcheck@v$VERSION" >&2
fi
"$DIR/staticcheck" -version >/dev/null 2>&1 || { echo "staticcheck.sh: $DIR/staticcheck does not run" >&2; exit 1; }
echo "$DIR/staticcheck"
