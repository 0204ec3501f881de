"""Tabulates the replays of scripts/bench-real.sh.

usage: python3 scripts/bench_real.py OUTDIR POLICY,... RATE,...

Reads OUTDIR/<policy>-<rate>.json (dualmap replay --json) and prints one
Markdown row per rate and policy: requests served and failed, throughput
(served requests and generated tokens per second of the replay), client TTFT
p50/p90/p99 (streamed: at the first content chunk), the engine-reported
cached-token share (usage.prompt_tokens_details.cached_tokens over
usage.prompt_tokens, summed over served requests) and the per-instance split
of the requests (by the x-dualmap-instance header).
"""
import json
import os
import sys


def row(path):
    rep = json.load(open(path))
    s, results = rep["summary"], rep.get("results", [])
    ok = [r for r in results if r.get("ok")]
    prompt = sum(r.get("prompt_tokens", 0) for r in ok if r.get("usage"))
    cached = sum(r.get("cached_tokens", 0) for r in ok if r.get("usage"))
    gen = sum(r.get("completion_tokens", 0) for r in ok)
    dur = s.get("duration_s") or 1
    per = s.get("per_instance", {})
    split = "/".join(str(per[k]["requests"]) for k in sorted(per))
    t = s["ttft"]
    return {
        "ok": s["ok"], "failed": s["failed"], "rps": s["ok"] / dur, "tps": gen / dur,
        "p50": t["p50_s"], "p90": t["p90_s"], "p99": t["p99_s"],
        "share": cached / prompt if prompt else float("nan"), "split": split,
        "prompt_mean": prompt / max(1, len([r for r in ok if r.get("usage")])),
        "input_mean": sum(r.get("input_tokens", 0) for r in ok) / max(1, len(ok)),
    }


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    out, policies, rates = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
    print("| rate (req/s) | policy | served / failed | served req/s | gen tok/s | TTFT p50 | p90 | p99 | engine cached share | per-instance split |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratio = []
    for rate in rates:
        for policy in policies:
            path = os.path.join(out, f"{policy}-{rate}.json")
            if not os.path.exists(path):
                print(f"| {rate} | {policy} | (no report) | | | | | | | |")
                continue
            r = row(path)
            if r["input_mean"]:
                ratio.append(r["prompt_mean"] / r["input_mean"])
            print(f"| {rate} | {policy} | {r['ok']} / {r['failed']} | {r['rps']:.2f} | {r['tps']:.0f} | "
                  f"{r['p50']:.3f} s | {r['p90']:.3f} s | {r['p99']:.3f} s | {100 * r['share']:.1f}% | {r['split']} |")
    if ratio:
        print(f"\nllama.cpp prompt tokens per replayed trace token (scaled): {sum(ratio) / len(ratio):.2f}")


if __name__ == "__main__":
    main()
