#!/usr/bin/env bash
# gremlins.sh installs the gremlins mutation tester
# (github.com/go-gremlins/gremlins, from the Go module proxy) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/gremlins-$VERSION/bin, outside the
# repository, when it is not there yet, and prints the binary's path as its
# last line. Idempotent and fast once installed. Needs go and access to the
# Go module proxy.
set -euo pipefail
VERSION=0.6.0
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/gremlins-$VERSION/bin"
GO=${GO:-go}
if [ ! -x "$DIR/gremlins" ]; then
	echo "gremlins.sh: installing github.com/go-gremlins/gremlins/cmd/gremlins@v$VERSION into $DIR" >&2
	mkdir -p "$DIR"
	# install pkg@version builds outside this module: go.mod and go.sum are left alone.
	GOBIN="$DIR" "$GO" install "github.com/go-gremlins/gremlins/cmd/gremlins@v$VERSION" >&2
fi
"$DIR/gremlins" --version >/dev/null 2>&1 || { echo "gremlins.sh: $DIR/gremlins does not run" >&2; exit 1; }
echo "$DIR/gremlins"
