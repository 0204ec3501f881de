#!/usr/bin/env bash
# Goodput of DualMap and the baselines on every workload of the evaluation
# (issue 13's targets), on the realistic engine: one line per policy and
# workload. Usage: scripts/loadmodel-eval.sh SEED REPLICAS [POLICIES]
#   SEED      generator seed (tuning used 1; the reported figures use 2)
#   REPLICAS  router replicas (1, or 4 at 500 ms sync)
# Needs the conversation trace at $TRACE (default ../shared/traces/...).
set -euo pipefail
seed=${1:-2}
reps=${2:-1}
pols=${3:-dualmap,least-loaded,min-ttft,preble,round-robin,cache-affinity,consistent-hash-bounded-load,random}
bin=${DUALMAP_BIN:-$(mktemp -d)/dualmap}
[ -x "$bin" ] || go build -o "$bin" ./cmd/dualmap
trace=${TRACE:-../shared/traces/conversation_trace.jsonl}
run() { # name, then sim flags
	local name=$1
	shift
	echo "== $name"
	"$bin" sim "$@" --policies "$pols" --queue router --replicas "$reps" --sync-interval 500ms --quiet |
		sed -n '/^goodput/,$p' | tail -n +2
}
if [ -f "$trace" ]; then
	run conversation --trace "$trace" --requests 4000 --qps-start 2 --qps-step 0.5
fi
run agent --generate "seed=$seed" --qps-start 2 --qps-step 2
run identical --generate "shape=fixed,prompt_tokens=5000,requests=3000,seed=$seed" --qps 4,8,16,24,32,48,64
run hot-prefix --generate "shape=hot-prefix,prefix_share=0.5,seed=$seed" --qps-start 2 --qps-step 2
run chat --generate "shape=chat,seed=$seed" --qps-start 4 --qps-step 4
run bursts --generate "arrival=bursty,seed=$seed" --qps-start 2 --qps-step 2
run mixed-slo --generate "slo_mix=1s:0.25/2s:0.25/30s:0.5,seed=$seed" --qps-start 2 --qps-step 2
