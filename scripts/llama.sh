#!/usr/bin/env bash
# llama.sh builds llama.cpp's llama-server (CPU only) and writes a small
# random-weight Llama-architecture GGUF model for it, both cached outside the
# repository in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llama-$VERSION/
# keyed by the pinned llama-cpp-python version whose PyPI source distribution
# carries llama.cpp (vendor/llama.cpp). Nothing is fetched but that source
# distribution and, for the model generator, the gguf and numpy packages
# (installed into a virtualenv in the same cache directory).
#
# For: make run ENGINE=llamacpp, the real-engine e2e tests, make bench-real.
# Idempotent: a second run only checks the cache. The build takes about ten
# minutes on 2 cores; the model about five seconds.
#
# Output: the last two lines on stdout are the llama-server binary's path and
# the model's path, in that order; progress goes to stderr. With --source it
# only fetches the llama.cpp source (no build) and prints its directory
# (scripts/chattmpl.sh reads the chat templates under models/templates).
#
# Environment: DUALMAP_LLAMA_JOBS (make -j, default: nproc),
# DUALMAP_LLAMA_NATIVE (ON, the default, optimises for this CPU; OFF for a
# portable binary; the cache directory then gets a -portable suffix).
set -euo pipefail

VERSION=0.3.36
NATIVE=${DUALMAP_LLAMA_NATIVE:-ON}
JOBS=${DUALMAP_LLAMA_JOBS:-$(nproc 2>/dev/null || echo 2)}
# The generated model: tiny on purpose (4 layers, width 256, about 40 MB), so
# a 2-core machine runs several instances; every prompt token still costs
# real compute, so prefix caching shows.
MODEL_ARGS=(--layers 4 --width 256 --ffn 768 --heads 8 --kv-heads 4 --ctx 8192 --seed 18)
MODEL_NAME=dualmap-tiny-l4-w256.gguf

die() { echo "llama.sh: $*" >&2; exit 1; }
here="$(cd "$(dirname "$0")" && pwd)"

suffix=""
[ "$NATIVE" = ON ] || suffix=-portable
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/llama-$VERSION$suffix"
BIN="$CACHE/bin/llama-server"
MODEL="$CACHE/models/$MODEL_NAME"
SRC="$CACHE/src/llama_cpp_python-$VERSION/vendor/llama.cpp"
mkdir -p "$CACHE"

SOURCE_ONLY=0
[ "${1:-}" = --source ] && SOURCE_ONLY=1

need_apt=()
[ "$SOURCE_ONLY" = 1 ] || command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
[ "$SOURCE_ONLY" = 1 ] || command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
[ "$SOURCE_ONLY" = 1 ] || command -v make >/dev/null 2>&1 || need_apt+=(make)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
	command -v apt-get >/dev/null 2>&1 || die "missing ${need_apt[*]} and no apt-get to install them"
	echo "llama.sh: installing ${need_apt[*]}" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >&2
fi

# 1. The source: llama-cpp-python's sdist, unpacked once.
if [ ! -f "$SRC/CMakeLists.txt" ]; then
	echo "llama.sh: downloading llama-cpp-python==$VERSION (source distribution) into $CACHE" >&2
	mkdir -p "$CACHE/dl" "$CACHE/src"
	python3 -m pip download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
		-d "$CACHE/dl" "llama-cpp-python==$VERSION" >&2 ||
		die "pip download llama-cpp-python==$VERSION failed"
	tarball=$(ls "$CACHE"/dl/llama_cpp_python-"$VERSION".tar.gz 2>/dev/null | head -n 1)
	[ -n "$tarball" ] || die "no llama_cpp_python-$VERSION.tar.gz in $CACHE/dl"
	tar -xzf "$tarball" -C "$CACHE/src"
	[ -f "$SRC/CMakeLists.txt" ] || die "no vendor/llama.cpp in $tarball"
	rm -f "$tarball"
fi

if [ "$SOURCE_ONLY" = 1 ]; then
	echo "$SRC"
	exit 0
fi

# 2. llama-server only, with every download off.
if [ ! -x "$BIN" ]; then
	echo "llama.sh: building llama-server (Release, CPU, GGML_NATIVE=$NATIVE, -j$JOBS); about 10 minutes" >&2
	start=$(date +%s)
	cmake -S "$SRC" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release \
		-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
		-DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE="$NATIVE" >"$CACHE/cmake.log" 2>&1 ||
		die "cmake configure failed; see $CACHE/cmake.log"
	cmake --build "$CACHE/build" --target llama-server -j "$JOBS" >"$CACHE/build.log" 2>&1 ||
		die "build failed; see $CACHE/build.log"
	mkdir -p "$CACHE/bin"
	install -m 0755 "$CACHE/build/bin/llama-server" "$BIN"
	echo "llama.sh: built llama-server in $(( $(date +%s) - start )) s" >&2
	rm -rf "$CACHE/build"
fi
"$BIN" --version >/dev/null 2>&1 || die "$BIN does not run (remove $CACHE and rerun)"

# 3. The model: our generator, the gguf package and numpy in a venv here.
VENV="$CACHE/venv"
if [ ! -f "$MODEL" ]; then
	if ! "$VENV/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
		echo "llama.sh: installing gguf (from the llama.cpp source) and numpy into $VENV" >&2
		python3 -m venv "$VENV" >&2
		"$VENV/bin/pip" install --quiet --disable-pip-version-check numpy "$SRC/gguf-py" >&2 ||
			die "pip install numpy gguf failed"
	fi
	vocab="$SRC/models/ggml-vocab-llama-spm.gguf"
	[ -f "$vocab" ] || die "no $vocab in the llama.cpp source"
	mkdir -p "$CACHE/models"
	echo "llama.sh: writing $MODEL" >&2
	"$VENV/bin/python" "$here/llama_model.py" --vocab "$vocab" --out "$MODEL.tmp" "${MODEL_ARGS[@]}" >&2 ||
		die "model generation failed"
	mv "$MODEL.tmp" "$MODEL"
fi

echo "$BIN"
echo "$MODEL"
