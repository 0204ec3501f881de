#!/usr/bin/env bash
# chattmpl.sh sets up the independent chat-template renderer that
# internal/chattmpl's comparison test checks the router against:
# transformers' render_jinja_template (what vLLM and SGLang call to render a
# chat) in a virtualenv cached outside the repository in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/chattmpl-$TRANSFORMERS/
# and the real chat templates of llama.cpp's models/templates (from the
# llama.cpp source that scripts/llama.sh fetches; --source fetches only that).
#
# Only PyPI packages are installed (transformers with its dependencies,
# no torch: rendering needs no model); about 300 MB and under a minute.
# Idempotent: a second run only checks the cache.
#
# Output: the last two lines on stdout are the virtualenv's python and the
# templates directory, in that order; progress goes to stderr.
set -euo pipefail

TRANSFORMERS=5.24.0
JINJA2=3.1.6

die() { echo "chattmpl.sh: $*" >&2; exit 1; }
here="$(cd "$(dirname "$0")" && pwd)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/dualmap/chattmpl-$TRANSFORMERS"
VENV="$CACHE/venv"
PY="$VENV/bin/python"

python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || {
	command -v apt-get >/dev/null 2>&1 || die "missing python3-venv and no apt-get to install it"
	echo "chattmpl.sh: installing python3-venv" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
}

check='from transformers.utils.chat_template_utils import render_jinja_template'
if [ ! -f "$CACHE/complete" ] || ! "$PY" -c "$check" >/dev/null 2>&1; then
	echo "chattmpl.sh: installing transformers==$TRANSFORMERS jinja2==$JINJA2 into $VENV" >&2
	rm -rf "$VENV" "$CACHE/complete"
	mkdir -p "$CACHE"
	python3 -m venv "$VENV" >&2
	"$VENV/bin/pip" install --quiet --disable-pip-version-check \
		"transformers==$TRANSFORMERS" "jinja2==$JINJA2" >&2 ||
		die "pip install transformers==$TRANSFORMERS failed"
	"$PY" -c "$check" >/dev/null 2>&1 || die "transformers' renderer does not import in $VENV"
	touch "$CACHE/complete"
fi

src=$(bash "$here/llama.sh" --source | tail -n 1)
templates="$src/models/templates"
ls "$templates"/*.jinja >/dev/null 2>&1 || die "no chat templates in $templates"

echo "$PY"
echo "$templates"
