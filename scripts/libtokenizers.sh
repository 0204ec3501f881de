#!/usr/bin/env bash
# libtokenizers.sh builds libtokenizers.a, the Rust static library that
# github.com/daulet/tokenizers links against (#cgo LDFLAGS: -ltokenizers),
# from that Go module's own Rust sources, with cargo.
#
# For: `make libtokenizers` and `make test-tokenizers`, i.e. building dualmap
# with -tags tokenizers (real Hugging Face tokenizers in package tokenize).
# Not for: fetching prebuilt binaries; everything is compiled locally.
#
# The build lives outside the repository, in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/libtokenizers-$VERSION/
# (the module cache is read-only, so the sources are copied there first) and
# keeps target/ so reruns are fast. Idempotent: when libtokenizers.a already
# exists nothing is built. The last line on stdout is the directory holding
# libtokenizers.a, for use as CGO_LDFLAGS="-L<dir>"; progress goes to stderr.
set -euo pipefail

VERSION=1.22.1
MODULE=github.com/daulet/tokenizers

die() { echo "libtokenizers.sh: $*" >&2; exit 1; }

CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap"
WORK="$CACHE_ROOT/libtokenizers-$VERSION"
LIBDIR="$WORK/target/release"

if [ -f "$LIBDIR/libtokenizers.a" ]; then
	echo "$LIBDIR"
	exit 0
fi

command -v cargo >/dev/null 2>&1 ||
	die "cargo not found: install a Rust toolchain (https://rustup.rs, or your distribution's cargo package) and rerun"
command -v go >/dev/null 2>&1 || die "go not found in PATH"

# Locate the module source; download it into the module cache if needed.
SRC="$(go env GOMODCACHE)/$MODULE@v$VERSION"
if [ ! -f "$SRC/Cargo.toml" ]; then
	echo "libtokenizers.sh: downloading $MODULE@v$VERSION into the module cache" >&2
	go mod download "$MODULE@v$VERSION" >&2 || die "go mod download $MODULE@v$VERSION failed"
fi
[ -f "$SRC/Cargo.toml" ] || die "no Cargo.toml in $SRC"

# Copy only what cargo needs (the sources are read-only in the module cache).
mkdir -p "$WORK"
for f in Cargo.toml Cargo.lock tokenizers.h; do
	[ -f "$SRC/$f" ] && install -m 0644 "$SRC/$f" "$WORK/$f"
done
rm -rf "$WORK/src" "$WORK/benches"
cp -R "$SRC/src" "$WORK/src"
# Cargo.toml declares a [[bench]]; cargo refuses a manifest whose bench file is missing.
[ -d "$SRC/benches" ] && cp -R "$SRC/benches" "$WORK/benches"
chmod -R u+w "$WORK"

echo "libtokenizers.sh: building libtokenizers.a in $WORK (takes several minutes the first time)" >&2
cd "$WORK"
# --locked when Cargo.lock matches Cargo.toml; otherwise let cargo resolve.
locked=--locked
if ! cargo metadata --locked --format-version 1 >/dev/null 2>&1; then
	echo "libtokenizers.sh: Cargo.lock cannot be used as is; building without --locked" >&2
	locked=
fi
cargo build --release $locked --lib >&2 || die "cargo build failed in $WORK"

[ -f "$LIBDIR/libtokenizers.a" ] || die "cargo finished but $LIBDIR/libtokenizers.a is missing"
echo "$LIBDIR"
