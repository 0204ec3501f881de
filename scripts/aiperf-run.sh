#!/usr/bin/env bash
# aiperf-run.sh BASE_URL WORKLOAD RATE_QPS OUTDIR: drives an OpenAI-compatible
# endpoint (an Envoy in front of the router, or one engine) with NVIDIA's
# AIPerf 0.13.0 (scripts/aiperf.sh installs it, cached outside the
# repository), streaming chat completions, and prints as its last stdout line
# one JSON object:
#
#   {"ttft_p50_ms": ..., "ttft_p90_ms": ..., "ttft_p99_ms": ..., "e2e_p50_ms": ...,
#    "output_tokens_per_s": ..., "requests": N, "failed": N}
#
# WORKLOAD is a Mooncake-format trace (*.jsonl; e.g. from `dualmap replay
# --write-trace`), replayed with its arrivals rescaled to RATE_QPS as `dualmap
# replay --qps` rescales them, or a shared-prefix workload (*.json, e.g.
# scripts/aiperf-shared-prefix.json; see scripts/aiperf_run.py), AIPerf's own
# prefix-prompt synthesis with Poisson arrivals at RATE_QPS. AIPerf's
# artifacts (profile_export_aiperf.json, per-request profile_export.jsonl,
# logs) and its console output (aiperf.log) go to OUTDIR.
#
#   DUALMAP_AIPERF_MODEL       model name sent (dualmap-sim, as `make run` and `dualmap replay`)
#   DUALMAP_AIPERF_BLOCK_SIZE  tokens per hash id of a trace (512, Mooncake's);
#                              DUALMAP_PEER_BLOCK_SIZE, which `make bench-peer`
#                              sets to the size of the trace it wrote, wins
#   DUALMAP_AIPERF_TIMEOUT     per-request timeout in seconds (120, as `dualmap replay`)
#   DUALMAP_AIPERF_CONCURRENCY cap on requests in flight (unset: none; AIPerf's own)
#   DUALMAP_AIPERF_WORKERS     AIPerf worker processes (4; AIPerf's own default on 2 cores
#                              is 1, whose event loop then lags and inflates TTFT at 20 req/s)
#   DUALMAP_AIPERF_ARGS        more `aiperf profile` arguments, split on spaces
#
# Prompts are made with Llama 3's tokenizer, offline (HF_HUB_OFFLINE=1; see
# scripts/aiperf.sh). Token counts in the figures are the server's (usage),
# not the tokenizer's (--use-server-token-count).
set -euo pipefail
if [ $# -ne 4 ]; then
	echo "usage: scripts/aiperf-run.sh BASE_URL WORKLOAD RATE_QPS OUTDIR" >&2
	exit 2
fi
URL=$1 WORKLOAD=$2 RATE=$3 OUT=$4
here="$(cd "$(dirname "$0")" && pwd)"
[ -f "$WORKLOAD" ] || { echo "aiperf-run.sh: $WORKLOAD: no such file" >&2; exit 2; }
WORKLOAD="$(cd "$(dirname "$WORKLOAD")" && pwd)/$(basename "$WORKLOAD")"
AIPERF=$(bash "$here/aiperf.sh" | tail -n 1)
VENV=$(dirname "$(dirname "$AIPERF")")
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/artifacts"
mapfile -t workload_args < <(python3 -B "$here/aiperf_run.py" args "$WORKLOAD" "$RATE" "$OUT" "${DUALMAP_PEER_BLOCK_SIZE:-${DUALMAP_AIPERF_BLOCK_SIZE:-512}}")
[ ${#workload_args[@]} -gt 0 ] || { echo "aiperf-run.sh: cannot use $WORKLOAD" >&2; exit 2; }
extra=()
if [ -n "${DUALMAP_AIPERF_CONCURRENCY:-}" ]; then extra+=(--concurrency "$DUALMAP_AIPERF_CONCURRENCY"); fi
# shellcheck disable=SC2206 # split on spaces, as documented
if [ -n "${DUALMAP_AIPERF_ARGS:-}" ]; then extra+=($DUALMAP_AIPERF_ARGS); fi
echo "aiperf-run.sh: $WORKLOAD at $RATE req/s against $URL, output in $OUT" >&2
rc=0
HF_HOME="$VENV/hf" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 \
	"$AIPERF" profile \
	--model "${DUALMAP_AIPERF_MODEL:-dualmap-sim}" \
	--tokenizer dualmap/llama-3-8b-instruct-tokenizer \
	--url "$URL" --endpoint-type chat --streaming --use-server-token-count \
	--request-timeout-seconds "${DUALMAP_AIPERF_TIMEOUT:-120}" \
	--workers-max "${DUALMAP_AIPERF_WORKERS:-4}" \
	"${workload_args[@]}" "${extra[@]}" \
	--artifact-dir "$OUT/artifacts" --ui-type none --no-server-metrics --no-gpu-telemetry \
	>"$OUT/aiperf.log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
	echo "aiperf-run.sh: aiperf failed (exit $rc); the end of $OUT/aiperf.log:" >&2
	tail -n 30 "$OUT/aiperf.log" >&2
	exit 1
fi
python3 -B "$here/aiperf_run.py" summary "$OUT/artifacts"
