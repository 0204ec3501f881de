#!/usr/bin/env bash
# make jaeger: a local Jaeger v2 beside `make run` (which exports to it when
# it is up): OTLP on 127.0.0.1:4317 (gRPC) and :4318 (HTTP), the UI and
# query API on http://127.0.0.1:16686. In-memory storage; Ctrl-C stops it.
# The binary is built once by scripts/jaeger.sh (slow the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
JAEGER=$(bash scripts/jaeger.sh | tail -n 1)
for port in 4317 4318 16686 16685; do
	if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
		echo "make jaeger: port $port is in use (is a Jaeger already running?)" >&2
		exit 1
	fi
done
echo "Jaeger UI: http://127.0.0.1:16686   OTLP: 127.0.0.1:4317 (gRPC), 127.0.0.1:4318 (HTTP)"
exec "$JAEGER" --config "$PWD/tools/jaeger/config.yaml"
