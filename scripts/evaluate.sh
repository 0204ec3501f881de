#!/bin/bash
# Reproduces every figure of docs/evaluation.md: bash scripts/evaluate.sh [OUTDIR]
# (default out/eval). About 6 minutes on 2 cores.
cd "$(dirname "$0")/.."
OUT=${1:-out/eval}; mkdir -p "$OUT"
T=${TRACE:-../shared/traces/conversation_trace.jsonl}
B=./bin/dualmap; make -s build
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 4000 --qps-step 0.25 --json $OUT/conv.json --plots $OUT/conv-plots --quiet ; } > $OUT/conv.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --generate default --json $OUT/gen.json --plots $OUT/gen-plots --qps-start 4 --qps-step 1 --quiet ; } > $OUT/gen.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 4000 --replicas 4 --sync-interval 500ms --queue router --qps-step 0.25 --seeds 3 --json $OUT/conv4.json --quiet ; } > $OUT/conv4.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --generate default --replicas 4 --sync-interval 500ms --queue router --qps-start 4 --qps-step 1 --seeds 3 --json $OUT/gen4.json --quiet ; } > $OUT/gen4.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 4000 --spread-ties --queue router --qps-start 4 --qps-step 0.25 --json $OUT/conv-spread.json --quiet ; } > $OUT/conv-spread.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 4000 --spread-ties --replicas 4 --sync-interval 500ms --queue router --qps-start 3 --qps-step 0.25 --seeds 3 --json $OUT/conv4-spread.json --quiet ; } > $OUT/conv4-spread.txt 2>&1
A="dualmap,dualmap(choice=min-ttft),dualmap(rebalance=false),dualmap(key_depth=2),dualmap(candidates=2),dualmap(candidates=3),dualmap(overflow=global),dualmap-paper"
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 4000 --queue router --policies "$A" --qps 5,5.5,6,6.5,7,7.25,7.5,8,8.5 --json $OUT/abl-conv.json --quiet ; } > $OUT/abl-conv.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --generate default --queue router --policies "$A" --qps 10,12,13,14,15,16,17 --json $OUT/abl-gen.json --quiet ; } > $OUT/abl-gen.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 1500 --warmup 0 --instances 4 --scale 74s:8 --queue router --policies dualmap,min-ttft,preble,cache-affinity --qps 4.5 --plots $OUT/elastic-plots --json $OUT/elastic.json --quiet ; } > $OUT/elastic.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 4000 --instances 8 --scale 200s:4 --queue router --policies dualmap,min-ttft,preble,cache-affinity --qps 2 --json $OUT/elastic-down.json --quiet ; } > $OUT/elastic-down.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 12000 --warmup 500 --queue router --policies dualmap --qps 5 --quiet ; } > $OUT/speed12k.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 4000 --trace-copies 4 --instances 32 --queue router --policies dualmap,min-ttft,preble,least-loaded,cache-affinity --qps 16,20,24,26,28,30,32 --json $OUT/n32.json --quiet ; } > $OUT/n32.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 4000 --trace-copies 16 --instances 128 --queue router --policies dualmap,min-ttft,preble,least-loaded,cache-affinity --qps 64,80,96,104,112,120,128 --json $OUT/n128.json --quiet ; } > $OUT/n128.txt 2>&1
Q="dualmap,preble,min-ttft,cache-affinity,dualmap(max_running=256),preble(max_running=256),min-ttft(max_running=256),cache-affinity(max_running=256),dualmap(order=cache),preble(order=cache),min-ttft(order=cache),cache-affinity(order=cache),dualmap(late=serve),preble(late=serve),dualmap(late=reject),preble(late=reject),min-ttft(late=reject),cache-affinity(late=reject)"
{ /usr/bin/time -f "%e s wall" $B sim --trace $T --requests 4000 --queue router --policies "$Q" --qps 5,5.5,6,6.5,7,8,10,12 --json $OUT/queue-conv.json --quiet ; } > $OUT/queue-conv.txt 2>&1
{ /usr/bin/time -f "%e s wall" $B sim --generate default --queue router --policies "$Q" --qps 12,14,15,16,18,20,24 --json $OUT/queue-gen.json --quiet ; } > $OUT/queue-gen.txt 2>&1
echo done > $OUT/DONE
python3 scripts/summarize.py "$OUT" conv gen conv4 gen4 conv-spread conv4-spread n32 n128 | tee "$OUT/summary.txt"
