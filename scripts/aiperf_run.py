#!/usr/bin/env python3
"""aiperf_run.py: the parts of scripts/aiperf-run.sh that are easier in
Python. Standard library only (it runs outside AIPerf's venv, and its tests,
scripts/test_aiperf_run.py, run in `make test` without that venv).

  aiperf_run.py args WORKLOAD RATE OUTDIR BLOCK_SIZE
      print, one per line, the AIPerf `profile` arguments that describe
      WORKLOAD at RATE requests/s (writing what they refer to into OUTDIR):
        *.jsonl  a Mooncake-format trace ({"timestamp": ms, "input_length": n,
                 "output_length": n, "hash_ids": [...]} per line, block ids
                 of BLOCK_SIZE tokens), checked, its arrivals rescaled to RATE
                 as `dualmap replay --qps` does (trace.ScaleToQPS) and written
                 to OUTDIR/workload.jsonl, then replayed on that fixed schedule;
        *.json   {"shared_prefix": {...}} (SHARED_PREFIX_KEYS): AIPerf's own
                 synthetic prefix-prompt workload, Poisson arrivals at RATE.
  aiperf_run.py summary ARTIFACT_DIR
      print one JSON line from AIPerf's profile_export_aiperf.json there:
      ttft_p50_ms, ttft_p90_ms, ttft_p99_ms, e2e_p50_ms, output_tokens_per_s,
      requests (sent and finished, failed included), failed, and cached_pct
      (the share of prompt tokens the server reported cached, in %).
  aiperf_run.py trace SHARED_PREFIX.json OUT.jsonl
      write a Mooncake trace of the same shape as the shared-prefix workload
      (for `dualmap replay`, to compare the two clients on one workload).
"""

import json
import math
import os
import random
import sys

# Keys of {"shared_prefix": {...}}; all required.
SHARED_PREFIX_KEYS = {
    "groups": "distinct shared prefixes (AIPerf --num-prefix-prompts)",
    "prefix_tokens": "tokens of each shared prefix (--prefix-prompt-length)",
    "question_tokens": "tokens of each request's own question (--isl, stddev 0)",
    "output_tokens": "max tokens generated (--osl, stddev 0)",
    "requests": "requests sent, each with a distinct question (--request-count, --num-dataset-entries)",
    "seed": "random seed (--random-seed)",
}


class WorkloadError(Exception):
    """A workload file aiperf-run.sh cannot use; the message says why."""


def read_trace(path, block_size):
    """The lines of a Mooncake trace as dicts, checked: timestamps present,
    non-negative and in order, lengths positive integers, and
    len(hash_ids) == ceil(input_length / block_size), so that AIPerf
    synthesises the prompts the trace describes (it cuts prompts into
    block_size-token blocks, one per id)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{n}"
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise WorkloadError(f"{where}: not JSON: {e}") from None
            if not isinstance(r, dict):
                raise WorkloadError(f"{where}: not a JSON object")
            ts = r.get("timestamp")
            if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
                raise WorkloadError(f"{where}: timestamp must be a number of milliseconds >= 0, got {ts!r}")
            if out and ts < out[-1]["timestamp"]:
                raise WorkloadError(f"{where}: timestamp {ts} is before the previous line's {out[-1]['timestamp']}")
            for key, least in (("input_length", 1), ("output_length", 1)):
                v = r.get(key)
                if isinstance(v, bool) or not isinstance(v, int) or v < least:
                    raise WorkloadError(f"{where}: {key} must be an integer >= {least}, got {v!r}")
            ids = r.get("hash_ids")
            if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise WorkloadError(f"{where}: hash_ids must be a list of integers")
            want = -(-r["input_length"] // block_size)
            if len(ids) != want:
                raise WorkloadError(
                    f"{where}: {len(ids)} hash_ids for input_length {r['input_length']}, want {want} "
                    f"(ceil(input_length / {block_size})); set DUALMAP_AIPERF_BLOCK_SIZE to the trace's block size")
            out.append(r)
    if not out:
        raise WorkloadError(f"{path}: no requests")
    return out


def scale_to_qps(reqs, qps):
    """Rescale, in place, the timestamps (ms) so that the mean rate
    (n-1)/duration is qps, keeping the first arrival and the bursts, as
    trace.ScaleToQPS does; requests that all arrive at once are spread
    1/qps apart."""
    n = len(reqs)
    if n < 2:
        return
    first = reqs[0]["timestamp"]
    span = reqs[-1]["timestamp"] - first
    new_span = (n - 1) * 1000.0 / qps
    for i, r in enumerate(reqs):
        if span <= 0:
            r["timestamp"] = first + i * new_span / (n - 1)
        else:
            r["timestamp"] = first + (r["timestamp"] - first) * new_span / span
        r["timestamp"] = round(r["timestamp"], 3)


def read_shared_prefix(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{path}: not JSON: {e}") from None
    sp = doc.get("shared_prefix") if isinstance(doc, dict) else None
    if not isinstance(sp, dict):
        raise WorkloadError(f'{path}: want {{"shared_prefix": {{...}}}}')
    unknown = sorted(set(sp) - set(SHARED_PREFIX_KEYS))
    if unknown:
        raise WorkloadError(f"{path}: shared_prefix: unknown keys {unknown} (known: {sorted(SHARED_PREFIX_KEYS)})")
    for key in SHARED_PREFIX_KEYS:
        v = sp.get(key)
        least = 0 if key == "seed" else 1
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise WorkloadError(f"{path}: shared_prefix.{key} ({SHARED_PREFIX_KEYS[key]}) must be an integer >= {least}, got {v!r}")
    return sp


def aiperf_args(workload, rate, outdir, block_size):
    if not (rate > 0 and math.isfinite(rate)):
        raise WorkloadError(f"rate must be a positive number of requests/s, got {rate}")
    if workload.endswith(".jsonl"):
        reqs = read_trace(workload, block_size)
        scale_to_qps(reqs, rate)
        path = os.path.join(outdir, "workload.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for r in reqs:
                f.write(json.dumps(r) + "\n")
        return ["--custom-dataset-type", "mooncake_trace", "--input-file", path,
                "--isl-block-size", str(block_size),
                "--fixed-schedule", "--fixed-schedule-auto-offset"]
    if workload.endswith(".json"):
        sp = read_shared_prefix(workload)
        return ["--num-prefix-prompts", str(sp["groups"]), "--prefix-prompt-length", str(sp["prefix_tokens"]),
                "--isl", str(sp["question_tokens"]), "--isl-stddev", "0",
                "--osl", str(sp["output_tokens"]), "--osl-stddev", "0",
                "--num-dataset-entries", str(sp["requests"]), "--request-count", str(sp["requests"]),
                "--random-seed", str(sp["seed"]),
                "--request-rate", repr(float(rate)), "--arrival-pattern", "poisson"]
    raise WorkloadError(f"{workload}: want a Mooncake trace (.jsonl) or a shared-prefix workload (.json)")


def summary(artifact_dir):
    """The one-line summary of AIPerf's aggregate export in artifact_dir."""
    path = os.path.join(artifact_dir, "profile_export_aiperf.json")
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except FileNotFoundError:
        raise WorkloadError(f"{path}: not found (did aiperf finish?)") from None
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{path}: not JSON: {e}") from None

    def stat(metric, key, required=True):
        v = d.get(metric, {}).get(key) if isinstance(d.get(metric), dict) else None
        if v is None and required:
            raise WorkloadError(f"{path}: no {metric}.{key}")
        return v

    ok = int(stat("request_count", "avg", required=False) or 0)
    failed = int(stat("error_request_count", "avg", required=False) or 0)
    if ok == 0:
        # Percentiles need at least one answered request.
        return {"ttft_p50_ms": None, "ttft_p90_ms": None, "ttft_p99_ms": None, "e2e_p50_ms": None,
                "output_tokens_per_s": 0.0, "requests": failed, "failed": failed, "cached_pct": None}
    r3 = lambda v: None if v is None else round(float(v), 3)
    return {
        "ttft_p50_ms": r3(stat("time_to_first_token", "p50")),
        "ttft_p90_ms": r3(stat("time_to_first_token", "p90")),
        "ttft_p99_ms": r3(stat("time_to_first_token", "p99")),
        "e2e_p50_ms": r3(stat("request_latency", "p50")),
        "output_tokens_per_s": r3(stat("output_token_throughput", "avg")),
        "requests": ok + failed,
        "failed": failed,
        "cached_pct": r3(stat("overall_usage_prompt_cache_read_pct", "avg", required=False)),
    }


def shared_prefix_trace(spec_path, out_path):
    """A Mooncake trace shaped like the shared-prefix workload, in 512-token
    blocks: request i has prefix group g (uniform, as AIPerf draws it) whose
    blocks are shared by the group, then its own question; Poisson arrivals
    at 1 request/s (dualmap replay --qps rescales them). The prefix length is
    rounded up to whole blocks (a prefix is shared block by block), so pick
    prefix_tokens as a multiple of 512 for the two clients to agree."""
    sp = read_shared_prefix(spec_path)
    bs = 512
    rng = random.Random(sp["seed"])
    pblocks = -(-sp["prefix_tokens"] // bs)
    prefix_len = pblocks * bs
    next_id = sp["groups"] * pblocks
    t = 0.0
    with open(out_path, "w", encoding="utf-8") as f:
        for i in range(sp["requests"]):
            g = rng.randrange(sp["groups"])
            n = prefix_len + sp["question_tokens"]
            own = -(-n // bs) - pblocks
            ids = list(range(g * pblocks, (g + 1) * pblocks)) + list(range(next_id, next_id + own))
            next_id += own
            f.write(json.dumps({"timestamp": round(t, 3), "input_length": n,
                                "output_length": sp["output_tokens"], "hash_ids": ids}) + "\n")
            t += rng.expovariate(1.0) * 1000.0


def main(argv):
    try:
        if len(argv) == 5 and argv[0] == "args":
            try:
                rate, block = float(argv[2]), int(argv[4])
            except ValueError:
                raise WorkloadError(f"rate {argv[2]!r} must be a number and block size {argv[4]!r} an integer") from None
            if block < 1:
                raise WorkloadError(f"block size must be >= 1, got {block}")
            print("\n".join(aiperf_args(argv[1], rate, argv[3], block)))
        elif len(argv) == 2 and argv[0] == "summary":
            print(json.dumps(summary(argv[1])))
        elif len(argv) == 3 and argv[0] == "trace":
            shared_prefix_trace(argv[1], argv[2])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (WorkloadError, OSError) as e:
        print(f"aiperf_run.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
