#!/usr/bin/env bash
# fuzz.sh runs every native Go fuzz target (func FuzzXxx in a _test.go file)
# of the module, one at a time, for FUZZTIME each (default 30s), with
# FUZZ_PARALLEL workers (default 1: the machines have 2 cores). A crasher
# is written by go test to the package's testdata/fuzz/FuzzXxx/ (commit it:
# it then runs as a regression test in every go test); the script carries
# on with the other targets and exits non-zero if any target failed.
# Minimising new coverage inputs is capped at FUZZMINIMIZETIME (default 5s)
# so that it does not eat the budget of a short run.
set -uo pipefail
FUZZTIME=${FUZZTIME:-30s}
FUZZ_PARALLEL=${FUZZ_PARALLEL:-1}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
GO=${GO:-go}
cd "$(dirname "$0")/.."
failed=()
start=$(date +%s)
while IFS=: read -r file fn; do
	dir=./$(dirname "$file")
	name=${fn#func }
	name=${name%%(*}
	echo "fuzz.sh: $dir $name for $FUZZTIME" >&2
	if ! "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" \
		-parallel "$FUZZ_PARALLEL" "$dir"; then
		failed+=("$dir $name")
	fi
done < <(git ls-files '*_test.go' | xargs grep -o '^func Fuzz[A-Za-z0-9_]*(' | sort)
echo "fuzz.sh: $(( $(date +%s) - start ))s in all" >&2
if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz.sh: FAILED: %s\n' "${failed[@]}" >&2
	exit 1
fi
