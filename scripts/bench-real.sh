#!/usr/bin/env bash
# make bench-real: the conversation trace (scaled down to these engines)
# replayed through Envoy -> dualmap -> real llama.cpp llama-servers, once per
# policy and request rate, each run on freshly started engines (empty
# caches). A report, not a test: prints a Markdown table (TTFT p50/p90/p99,
# throughput, the engine-reported cached-token share, the per-instance split)
# and writes every replay's JSON to the output directory.
#
#   BENCH_POLICIES (dualmap,round-robin,least-loaded,cache-affinity)
#   BENCH_RATES (1.5,5: one below and one past saturation on a quiet 2-core machine)
#   BENCH_REQUESTS (150)  BENCH_SCALE_TOKENS (0.04)  BENCH_MAX_OUTPUT (16)
#   BENCH_INSTANCES (2)  BENCH_THREADS (1)  BENCH_SLOTS (4)  BENCH_SLOT_CTX (4096)
#   BENCH_CACHE_RAM (0 MiB: only the slots keep prefixes, so eviction shows)
#   BENCH_SIM (1: then the same workload in dualmap sim with a profile
#   measured from llama-server)  BENCH_OUT (a new temporary directory)  TRACE (../shared/traces/conversation_trace.jsonl)
#
# Ports: Envoy 8080/9901, dualmap 9002/9090, engines 8001... (as make run).
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE=${TRACE:-../shared/traces/conversation_trace.jsonl}
POLICIES=${BENCH_POLICIES:-dualmap,round-robin,least-loaded,cache-affinity}
RATES=${BENCH_RATES:-1.5,5}
N=${BENCH_REQUESTS:-150}
SCALE=${BENCH_SCALE_TOKENS:-0.04}
MAXOUT=${BENCH_MAX_OUTPUT:-16}
INSTANCES=${BENCH_INSTANCES:-2}
THREADS=${BENCH_THREADS:-1}
SLOTS=${BENCH_SLOTS:-4}
SLOT_CTX=${BENCH_SLOT_CTX:-4096}
CACHE_RAM=${BENCH_CACHE_RAM:-0}
OUT=${BENCH_OUT:-$(mktemp -d -t dualmap-bench-real.XXXXXX)}
[ -f "$TRACE" ] || { echo "bench-real: trace $TRACE not found (set TRACE=...)" >&2; exit 1; }
case "$INSTANCES" in 1|2|3|4) ;; *) echo "bench-real: BENCH_INSTANCES=$INSTANCES: want 1 to 4" >&2; exit 1 ;; esac
for port in 8080 9901 9002 9090 8001 8002 8003 8004; do
	if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
		echo "bench-real: port $port is in use (make run still running?)" >&2
		exit 1
	fi
done
mkdir -p "$OUT"
ENVOY=$(bash scripts/envoy.sh | tail -n 1)
llama=$(bash scripts/llama.sh)
LLAMA_BIN=$(printf '%s\n' "$llama" | tail -n 2 | head -n 1)
LLAMA_MODEL=$(printf '%s\n' "$llama" | tail -n 1)
make -s build

pids=()
stop_all() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap stop_all EXIT INT TERM
wait_http() { for _ in $(seq 1 600); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "bench-real: $1 did not come up; logs in $OUT" >&2; exit 1; }

PORTS=()
for i in $(seq 1 "$INSTANCES"); do PORTS+=($((8000 + i))); done
cp envoy/front-proxy.yaml "$OUT/envoy.yaml"
for port in $(seq $((8001 + INSTANCES)) 8004); do sed -i "/port_value: $port}/d" "$OUT/envoy.yaml"; done

config() { # policy -> router config on stdout
	cat <<YAML
pools:
  - name: default
    models: ["*"]
    block_size: 16
    policy: {name: $1}
    metrics: {enabled: true, interval: 250ms}
    instances:
YAML
	for port in "${PORTS[@]}"; do echo "      - address: 127.0.0.1:$port"; done
	cat <<YAML
limits:
  max_running: $SLOTS
routing:
  debug_headers: true
health:
  interval: 1s
YAML
}

run_one() { # policy rate
	local policy=$1 rate=$2 tag="$1-$2"
	config "$policy" >"$OUT/$tag.yaml"
	for port in "${PORTS[@]}"; do
		"$LLAMA_BIN" --model "$LLAMA_MODEL" --alias dualmap-tiny --host 127.0.0.1 --port "$port" \
			--threads "$THREADS" --threads-batch "$THREADS" --parallel "$SLOTS" --ctx-size $((SLOTS * SLOT_CTX)) \
			--cache-ram "$CACHE_RAM" --metrics >"$OUT/$tag-llama-$port.log" 2>&1 &
		pids+=($!)
	done
	for port in "${PORTS[@]}"; do wait_http "http://127.0.0.1:$port/health"; done
	bin/dualmap serve --config "$OUT/$tag.yaml" >"$OUT/$tag-dualmap.log" 2>&1 &
	pids+=($!)
	wait_http "http://127.0.0.1:9090/readyz"
	"$ENVOY" -c "$OUT/envoy.yaml" --log-level warn >"$OUT/$tag-envoy.log" 2>&1 &
	pids+=($!)
	wait_http "http://127.0.0.1:9901/ready"
	echo "== $policy at $rate req/s: $N requests (tokens x$SCALE, max_tokens $MAXOUT) ==" >&2
	bin/dualmap replay --trace "$TRACE" --url http://127.0.0.1:8080 --requests "$N" --qps "$rate" \
		--scale-tokens "$SCALE" --max-output "$MAXOUT" --ignore-eos --model dualmap-tiny --quiet \
		--json "$OUT/$tag.json" >"$OUT/$tag.txt" 2>&1 || true
	for port in "${PORTS[@]}"; do curl -fsS "http://127.0.0.1:$port/metrics" >"$OUT/$tag-metrics-$port.txt" 2>/dev/null || true; done
	curl -fsS "http://127.0.0.1:9090/metrics" >"$OUT/$tag-router-metrics.txt" 2>/dev/null || true
	stop_all
	sleep 0.5
}

IFS=, read -ra rates <<<"$RATES"
IFS=, read -ra policies <<<"$POLICIES"
for rate in "${rates[@]}"; do
	for policy in "${policies[@]}"; do run_one "$policy" "$rate"; done
done
python3 scripts/bench_real.py "$OUT" "$POLICIES" "$RATES" | tee "$OUT/table.md"

# The simulator on the same workload: an engine profile measured from one
# llama-server like those above, the trace slice rescaled to llama.cpp's
# tokens (the ratio the replays measured), the same instances, slots and
# rates. Does it order the policies as the real engines did?
if [ "${BENCH_SIM:-1}" = 1 ]; then
	echo "== measuring a sim profile from llama-server (scripts/llama_profile.py) ==" >&2
	"$LLAMA_BIN" --model "$LLAMA_MODEL" --alias dualmap-tiny --host 127.0.0.1 --port 8001 \
		--threads "$THREADS" --threads-batch "$THREADS" --parallel "$SLOTS" --ctx-size $((SLOTS * SLOT_CTX)) \
		--cache-ram 0 --metrics >"$OUT/profile-llama.log" 2>&1 &
	pids+=($!)
	wait_http "http://127.0.0.1:8001/health"
	python3 scripts/llama_profile.py http://127.0.0.1:8001 "$SLOTS" "$SLOT_CTX" llamacpp-tiny-cpu >"$OUT/profile.json"
	stop_all
	ratio=$(python3 scripts/bench_real.py --ratio "$OUT" "$POLICIES" "$RATES")
	block=$(python3 -c "print(max(1, round(512 * $SCALE * $ratio)))")
	python3 scripts/bench_real.py --scale-trace "$TRACE" "$OUT/trace-scaled.jsonl" "$N" "$block" "$SCALE" "$MAXOUT"
	echo "== dualmap sim: $N requests, $block llama tokens per trace block ($ratio llama tokens per replayed token) ==" >&2
	bin/dualmap sim --trace "$OUT/trace-scaled.jsonl" --block-size "$block" --requests "$N" --warmup 0 \
		--instances "$INSTANCES" --max-running "$SLOTS" --profile "$OUT/profile.json" --policies "$POLICIES" \
		--qps "$RATES" --queue router --quiet --json "$OUT/sim.json" >"$OUT/sim.txt" 2>&1
	echo
	python3 scripts/bench_real.py --sim "$OUT" "$OUT/sim.json" "$POLICIES" "$RATES" | tee "$OUT/sim-table.md"
fi
echo "reports and logs: $OUT" >&2
