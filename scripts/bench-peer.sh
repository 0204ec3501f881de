#!/usr/bin/env bash
# make bench-peer LLMD_SRC=<llm-d-router checkout>: dualmap and llm-d's
# endpoint picker side by side behind the same gateway-style Envoy and the
# same simulated engines (e2e TestPeerReport, a report). Builds llm-d's EPP
# from LLMD_SRC once (scripts/llmd-epp.sh, cached outside the repository)
# and installs Envoy when missing (scripts/envoy.sh).
#
#   DUALMAP_PEER_QPS (20,200)   DUALMAP_PEER_REQUESTS (800)   DUALMAP_PEER_CONCURRENCY (2048)
#   DUALMAP_PEER_TRACE (../shared/traces/conversation_trace.jsonl)   DUALMAP_PEER_PHASES
#   (throughput,replay)   DUALMAP_PEER_METRICS (1: where requests wait)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LLMD_SRC:-}" ]; then
	echo "bench-peer: set LLMD_SRC to an llm-d-router checkout (e.g. git clone https://github.com/llm-d/llm-d-router)" >&2
	exit 2
fi
EPP=$(bash scripts/llmd-epp.sh "$LLMD_SRC" | tail -n 1)
ENVOY=$(bash scripts/envoy.sh | tail -n 1)
DUALMAP_BENCH_PEER=1 DUALMAP_LLMD_EPP="$EPP" DUALMAP_ENVOY="$ENVOY" \
	${GO:-go} test -tags e2e -count=1 -v -timeout 20m -run TestPeerReport ./e2e/
