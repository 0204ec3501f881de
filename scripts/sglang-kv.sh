#!/usr/bin/env bash
# sglang-kv.sh prepares SGLang's own KV-event publisher for
# e2e/kvevents_sglang_test.go, outside the repository, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/sglang-kv-<version>: the SGLang
# wheel (--no-deps: no GPU stack) for its sglang/srt/disaggregation/
# kv_events.py, and a venv with what that module needs (msgspec, pyzmq,
# pydantic). Prints the two environment settings the test reads:
#   DUALMAP_SGLANG_PY=<venv python>
#   DUALMAP_SGLANG_KV_EVENTS=<kv_events.py>
# Idempotent: a complete cache directory is reused.
set -euo pipefail
VERSION="${SGLANG_VERSION:-0.5.23}"
DIR="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/sglang-kv-$VERSION"
SRC="$DIR/sglang/srt/disaggregation/kv_events.py"
if [ ! -f "$DIR/.complete" ]; then
	rm -rf "$DIR.tmp" && mkdir -p "$DIR.tmp"
	python3 -m venv "$DIR.tmp/venv"
	"$DIR.tmp/venv/bin/pip" install -q msgspec pyzmq pydantic >&2
	"$DIR.tmp/venv/bin/pip" download -q --no-deps -d "$DIR.tmp/wheel" "sglang==$VERSION" >&2
	(cd "$DIR.tmp" && unzip -q -o wheel/sglang-*.whl 'sglang/srt/disaggregation/kv_events.py' && rm -rf wheel)
	rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
	# the venv's scripts name their directory: recreate it at its final place
	python3 -m venv --upgrade "$DIR/venv" >/dev/null
	touch "$DIR/.complete"
fi
echo "DUALMAP_SGLANG_PY=$DIR/venv/bin/python"
echo "DUALMAP_SGLANG_KV_EVENTS=$SRC"
