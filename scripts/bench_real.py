"""Tabulates the replays of scripts/bench-real.sh.

usage: python3 scripts/bench_real.py OUTDIR POLICY,... RATE,...
       python3 scripts/bench_real.py --ratio OUTDIR POLICY,... RATE,...
       python3 scripts/bench_real.py --scale-trace IN OUT N TOKENS_PER_BLOCK SCALE MAX_OUTPUT
       python3 scripts/bench_real.py --sim OUTDIR SIM_JSON POLICY,... RATE,...

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


def ratio_of(out, policies, rates):
    """llama.cpp prompt tokens per replayed (scaled) trace token."""
    rs = []
    for rate in rates:
        for policy in policies:
            path = os.path.join(out, f"{policy}-{rate}.json")
            if os.path.exists(path):
                r = row(path)
                if r["input_mean"]:
                    rs.append(r["prompt_mean"] / r["input_mean"])
    return sum(rs) / len(rs) if rs else 1.0


def scale_trace(src, dst, n, block, scale, max_output):
    """The first n requests with 512-token blocks rescaled to block tokens
    (every block but the last full), outputs scaled and capped as the
    replayer does: the workload the real engines saw, in their tokens."""
    f = block / 512
    with open(src) as fi, open(dst, "w") as fo:
        for i, line in enumerate(fi):
            if i >= n:
                break
            r = json.loads(line)
            ids = r["hash_ids"]
            last = r["input_length"] - 512 * (len(ids) - 1)
            r["input_length"] = block * (len(ids) - 1) + min(block, max(1, round(last * f)))
            r["output_length"] = max(1, min(round(r["output_length"] * scale), max_output))
            fo.write(json.dumps(r) + "\n")


def order(vals):
    return " < ".join(k for k, _ in sorted(vals.items(), key=lambda kv: kv[1]))


def sim_table(out, sim_json, policies, rates):
    sim = json.load(open(sim_json))
    runs = {(r["policy"], float(r["qps"])): r for r in sim["runs"] if r["queue"] == "router"}
    print("| rate (req/s) | policy | real TTFT p50 / p90 | sim TTFT p50 / p90 | real engine cached share | sim hit rate |")
    print("|---|---|---|---|---|---|")
    for rate in rates:
        real_p50, sim_p50 = {}, {}
        for policy in policies:
            path = os.path.join(out, f"{policy}-{rate}.json")
            sr = runs.get((policy, float(rate)))
            if not os.path.exists(path) or sr is None:
                continue
            r = row(path)
            real_p50[policy], sim_p50[policy] = r["p50"], sr["ttft_p50_s"]
            print(f"| {rate} | {policy} | {r['p50']:.3f} / {r['p90']:.3f} s | {sr['ttft_p50_s']:.3f} / {sr['ttft_p90_s']:.3f} s | "
                  f"{100 * r['share']:.1f}% | {100 * sr['cache_hit_rate']:.1f}% |")
        print(f"\nat {rate} req/s, TTFT p50 order: real {order(real_p50)}; sim {order(sim_p50)}"
              f" ({'same' if order(real_p50) == order(sim_p50) else 'different'})\n")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--ratio" and len(sys.argv) == 5:
        print(f"{ratio_of(sys.argv[2], sys.argv[3].split(','), sys.argv[4].split(',')):.3f}")
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--scale-trace" and len(sys.argv) == 8:
        a = sys.argv
        scale_trace(a[2], a[3], int(a[4]), int(a[5]), float(a[6]), int(a[7]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--sim" and len(sys.argv) == 6:
        sim_table(sys.argv[2], sys.argv[3], sys.argv[4].split(","), sys.argv[5].split(","))
        return
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
