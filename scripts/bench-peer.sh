#!/usr/bin/env bash
# make bench-peer LLMD_SRC=<llm-d-router checkout> [LLMD_SIM_SRC=<llm-d-inference-sim checkout>]:
# dualmap and llm-d's endpoint picker side by side behind the same
# gateway-style Envoy (envoy/gateway-epp.yaml), one and three replicas each,
# on llm-d's own vLLM simulator and/or `dualmap engine` (e2e TestPeerBench,
# a report). Builds llm-d's EPP from LLMD_SRC (scripts/llmd-epp.sh) and its
# simulator from LLMD_SIM_SRC (scripts/llmd-sim.sh) once, cached outside the
# repository, installs Envoy when missing (scripts/envoy.sh); fetches
# nothing else at run time. Per workload it measures the setup's capacity
# with a rate ramp, then runs every picker in turn at shares of it, fresh
# engines per run; it prints a Markdown table and writes results.json and
# results.md under DUALMAP_PEER_OUT/<engine>/, and each run's picker and
# engine /metrics (and dualmap's /debug/instances), and each picker's log
# (router-<i>.log, its last 2,000 lines), under
# DUALMAP_PEER_OUT/<engine>/routers/<run>/. A run starts once every
# picker's health port says SERVING and its ext_proc port accepts
# connections.
#
# Knobs (environment; defaults in brackets):
#   DUALMAP_PEER_ENGINE     engines, comma-separated: llmd-sim, dualmap
#                           [llmd-sim,dualmap with LLMD_SIM_SRC, else dualmap]
#   DUALMAP_PEER_INSTANCES  engines per run [8 llm-d simulators, 4 dualmap engines]
#   DUALMAP_LLMD_SIM_PROFILE the simulator's config [e2e/testdata/llmd-sim-profile.yaml]
#   DUALMAP_PEER_WORKLOADS  conversation, shared-prefix, tool-agent [all three]
#   DUALMAP_PEER_REQUESTS   requests per run [600]
#   DUALMAP_PEER_TRACE      the conversation trace [../shared/traces/conversation_trace.jsonl]
#   DUALMAP_PEER_PICKERS    dualmap, llm-d, dualmap-noqueue, round-robin [dualmap,llm-d]
#   DUALMAP_PEER_REPLICAS   replica counts [1,3]
#   DUALMAP_PEER_LOAD       rates, in % of the measured capacity [30,70,100,150]
#   DUALMAP_PEER_RUNS       runs of each (picker, rate, replicas) [2]
#   DUALMAP_PEER_CAPACITY   skip the ramp: workload:rate,... [measured]
#   DUALMAP_PEER_FLOOR      on llm-d's simulator, each workload's TTFT floor
#                           (what no picker beats at any load: one simulator with
#                           an unbounded cache, the requests one at a time, the
#                           profile's prefill cost): on, off, or only (floors, no
#                           runs) [on]
#   DUALMAP_PEER_RAMP       capacity ramp start,factor,steps in requests/s [4,1.4,10]
#   DUALMAP_PEER_RAMP_REQUESTS requests per ramp step [300]
#   DUALMAP_PEER_NOQUEUE    dualmap's limits line "without the router queue"
#                           (ramp and the dualmap-noqueue picker) [queue_budget_tokens: -1]
#   DUALMAP_PEER_DUALMAP_POOL one more pool key for dualmap's config, e.g.
#                           'metrics: {enabled: false}' (an A/B of a default) [none]
#   DUALMAP_PEER_DUALMAP_LIMITS one more limits key for dualmap's config [none]
#   DUALMAP_PEER_CLIENT     replay (dualmap replay, in process) or aiperf
#                           (bash scripts/aiperf-run.sh <base-url> <mooncake file> <rate> <outdir>) [replay]
#   DUALMAP_PEER_CONCURRENCY replay's cap on requests in flight [4096]
#   DUALMAP_PEER_OUT        output directory [out/peer-<UTC time>]
#   DUALMAP_PEER_TIMEOUT    go test -timeout [8h]
#   DUALMAP_E2E_PORTS       lo-hi: every fixed port of the stacks from this range
#                           (on a shared machine, so that no other process takes a
#                           port between the harness picking it and a process
#                           binding it) [24000 to just below the kernel's
#                           ephemeral ports, from a random one]
#   DUALMAP_PEER_THROUGHPUT 1: also the added-latency / maximum req/s / CPU
#                           phase (e2e TestPeerReport, dualmap engines) [off]
set -euo pipefail
cd "$(dirname "$0")/.."
pickers="${DUALMAP_PEER_PICKERS:-dualmap,llm-d}"
EPP=""
if [[ ",$pickers," == *",llm-d,"* ]]; then
	if [ -z "${LLMD_SRC:-}" ]; then
		echo "bench-peer: set LLMD_SRC to an llm-d-router checkout (e.g. git clone https://github.com/llm-d/llm-d-router), or leave llm-d out of DUALMAP_PEER_PICKERS" >&2
		exit 2
	fi
	EPP=$(bash scripts/llmd-epp.sh "$LLMD_SRC" | tail -n 1)
fi
SIM=""
if [ -n "${LLMD_SIM_SRC:-}" ]; then
	SIM=$(bash scripts/llmd-sim.sh "$LLMD_SIM_SRC" "${LLMD_SRC:?LLMD_SRC (an llm-d-router checkout) is needed to build the simulator}" | tail -n 1)
	engines="${DUALMAP_PEER_ENGINE:-llmd-sim,dualmap}"
else
	engines="${DUALMAP_PEER_ENGINE:-dualmap}"
fi
ENVOY=$(bash scripts/envoy.sh | tail -n 1)
out="${DUALMAP_PEER_OUT:-$PWD/out/peer-$(date -u +%Y%m%d-%H%M%S)}"
IFS=, read -r -a list <<<"$engines"
for engine in "${list[@]}"; do
	if [ "$engine" = llmd-sim ] && [ -z "$SIM" ]; then
		echo "bench-peer: engine llmd-sim needs LLMD_SIM_SRC (an llm-d-inference-sim checkout)" >&2
		exit 2
	fi
	echo "bench-peer: $engine engines, pickers $pickers, output in $out/$engine (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	DUALMAP_BENCH_PEER=1 DUALMAP_PEER_ENGINE="$engine" DUALMAP_PEER_PICKERS="$pickers" DUALMAP_PEER_OUT="$out/$engine" \
		DUALMAP_LLMD_EPP="$EPP" DUALMAP_LLMD_SIM="$SIM" DUALMAP_ENVOY="$ENVOY" \
		${GO:-go} test -tags e2e -count=1 -v -timeout "${DUALMAP_PEER_TIMEOUT:-8h}" -run '^TestPeerBench$' ./e2e/
done
if [ "${DUALMAP_PEER_THROUGHPUT:-}" = 1 ]; then
	DUALMAP_BENCH_PEER=1 DUALMAP_PEER_PHASES=throughput DUALMAP_LLMD_EPP="${EPP:?the throughput phase needs llm-d in DUALMAP_PEER_PICKERS}" DUALMAP_ENVOY="$ENVOY" \
		${GO:-go} test -tags e2e -count=1 -v -timeout 20m -run '^TestPeerReport$' ./e2e/
fi
