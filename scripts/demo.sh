#!/usr/bin/env bash
# make demo: replay the start of the Mooncake conversation trace through
# Envoy -> dualmap -> 4 simulated engines, once with the dualmap policy and
# once with round robin, and print both summaries (per-instance requests,
# prefix-cache hit rate, TTFT p50/p90) side by side.
#
#   DEMO_REQUESTS (300)   DEMO_QPS (4)   DEMO_SCALE_TOKENS (0.25)
#   DEMO_TIME_SCALE (10)  TRACE (../shared/traces/conversation_trace.jsonl)
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE=${TRACE:-../shared/traces/conversation_trace.jsonl}
N=${DEMO_REQUESTS:-300}
QPS=${DEMO_QPS:-4}
SCALE=${DEMO_SCALE_TOKENS:-0.25}
TS=${DEMO_TIME_SCALE:-10}
[ -f "$TRACE" ] || { echo "make demo: trace $TRACE not found (set TRACE=...)" >&2; exit 1; }
ENVOY=$(bash scripts/envoy.sh | tail -n 1)
make -s build
LOGS=$(mktemp -d -t dualmap-demo.XXXXXX)
pids=()
stop_all() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap stop_all EXIT INT TERM
wait_http() { for _ in $(seq 1 300); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "demo: $1 did not come up; logs in $LOGS" >&2; exit 1; }

run_with() { # policy
	local policy=$1 cfg="$LOGS/$1.yaml"
	if [ "$policy" = dualmap ]; then cp examples/dualmap.yaml "$cfg"
	else sed "s/name: dualmap$/name: $policy/; /params:/d; /headroom:/d" examples/dualmap.yaml > "$cfg"; fi
	for port in 8001 8002 8003 8004; do
		bin/dualmap engine --listen 127.0.0.1:$port --name 127.0.0.1:$port --time-scale "$TS" >"$LOGS/$policy-engine-$port.log" 2>&1 &
		pids+=($!)
	done
	for port in 8001 8002 8003 8004; do wait_http "http://127.0.0.1:$port/health"; done
	bin/dualmap serve --config "$cfg" >"$LOGS/$policy-dualmap.log" 2>&1 &
	pids+=($!)
	wait_http "http://127.0.0.1:9090/readyz"
	"$ENVOY" -c envoy/front-proxy.yaml --log-level warn >"$LOGS/$policy-envoy.log" 2>&1 &
	pids+=($!)
	wait_http "http://127.0.0.1:9901/ready"
	echo "== policy $policy: $N requests at $QPS QPS (tokens x$SCALE, engines x$TS time) =="
	bin/dualmap replay --trace "$TRACE" --url http://127.0.0.1:8080 --requests "$N" --qps "$QPS" \
		--scale-tokens "$SCALE" --max-output 32 --quiet --json "$LOGS/$policy.json" || true
	stop_all
	sleep 0.5
}
run_with dualmap
run_with round-robin
echo "reports: $LOGS/dualmap.json $LOGS/round-robin.json"
