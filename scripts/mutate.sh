#!/usr/bin/env bash
# mutate.sh runs mutation testing (gremlins, installed by scripts/gremlins.sh)
# over MUTATE_PKGS (default: scheduler internal/extproc internal/state
# internal/coord, every file of each), one package at a
# time with MUTATE_WORKERS workers (default 1: the machines have 2 cores and
# are shared). Each mutant is one small change to the package's code
# (a < made <=, a + made -, a condition negated...); the package's tests
# run against it and should fail ("KILLED"). A mutant that "LIVED" is a
# change no test noticed: a missing test, or an equivalent mutant (see
# docs/testing.md, which lists the known ones).
#
# Knobs (environment):
#   MUTATE_PKGS      packages, as directories (default "scheduler internal/extproc
#                    internal/state internal/coord")
#   MUTATE_EXCLUDE   regexp of files to leave alone, relative to the package
#                    directory, e.g. '^(ring|flow)\.go$'
#   MUTATE_DIFF      only mutate lines changed since this git ref (e.g. main):
#                    the habit for a branch
#   MUTATE_OUT       directory for the per-package JSON reports (default: a
#                    temporary directory, printed)
#   MUTATE_TIMEOUT_COEFFICIENT  gremlins' --timeout-coefficient (default 10:
#                    a busy machine must not turn slow runs into timeouts)
# The tests run with -count=1 (GOFLAGS): a cached coverage run would make
# gremlins' timeouts far too short.
set -euo pipefail
cd "$(dirname "$0")/.."
G=$(bash scripts/gremlins.sh | tail -n 1)
PKGS=${MUTATE_PKGS:-scheduler internal/extproc internal/state internal/coord}
OUT=${MUTATE_OUT:-$(mktemp -d)}
mkdir -p "$OUT"
args=(--workers "${MUTATE_WORKERS:-1}" --timeout-coefficient "${MUTATE_TIMEOUT_COEFFICIENT:-10}")
[ -n "${MUTATE_EXCLUDE:-}" ] && args+=(--exclude-files "$MUTATE_EXCLUDE")
[ -n "${MUTATE_DIFF:-}" ] && args+=(--diff "$MUTATE_DIFF")
for p in $PKGS; do
	echo "mutate.sh: $p (${args[*]})" >&2
	start=$(date +%s)
	GOFLAGS="${GOFLAGS:+$GOFLAGS }-count=1" "$G" unleash "${args[@]}" -o "$OUT/$(basename $p).json" "./$p" | tee "$OUT/$(basename $p).log"
	log="$OUT/$(basename $p).log"
	k=$(grep -c '^ *KILLED' "$log" || true)
	l=$(grep -c '^ *LIVED' "$log" || true)
	to=$(grep -c '^ *TIMED OUT' "$log" || true)
	nc=$(grep -c '^ *NOT COVERED' "$log" || true)
	eff=n/a
	[ $((k + l)) -gt 0 ] && eff=$(awk -v k="$k" -v l="$l" 'BEGIN { printf "%.1f%%", 100 * k / (k + l) }')
	echo "mutate.sh: $p took $(( $(date +%s) - start ))s: killed $k, lived $l, timed out $to, not covered $nc; efficacy (killed / (killed + lived)) $eff; report $OUT/$(basename $p).json, log $log" >&2
done
