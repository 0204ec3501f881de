"""Summarises the JSON reports of scripts/evaluate.sh.

For each report: goodput per policy and queue mode, DualMap's goodput over
the best baseline's, and, at the first swept rate where the best baseline's
SLO attainment is below 50%, DualMap's attainment over it.

usage: python3 scripts/summarize.py OUTDIR NAME...
"""
import collections
import json
import sys


def summarize(path, name):
    rep = json.load(open(f"{path}/{name}.json"))
    print(f"== {name}: {rep['trace']} requests={rep['requests']} instances={rep['instances']} "
          f"replicas={rep['replicas']} upper-bound hit rate={rep['upper_bound_hit_rate']:.3f}")
    for queue in sorted({r["queue"] for r in rep["runs"]}):
        gp = {g["policy"]: g["qps"] for g in rep["goodput"] if g["queue"] == queue}
        base = {k: v for k, v in gp.items() if not k.startswith("dualmap")}
        if not base:
            continue
        best = max(base, key=base.get)
        ordered = sorted(gp.items(), key=lambda kv: -kv[1])
        print(f"  [{queue}] goodput: " + ", ".join(f"{k}={v:.2f}" for k, v in ordered))
        ratio = gp.get("dualmap", 0) / base[best] if base[best] else float("nan")
        print(f"  [{queue}] dualmap / best baseline ({best}) = {ratio:.3f}")
        att = collections.defaultdict(dict)
        for r in rep["runs"]:
            if r["queue"] == queue:
                att[r["qps"]][r["policy"]] = r["slo_attainment"]
        for qps in sorted(att):
            top = max(v for k, v in att[qps].items() if not k.startswith("dualmap"))
            if top < 0.5:
                dm = att[qps].get("dualmap", 0)
                print(f"  [{queue}] first QPS where the best baseline is below 50%: {qps}: "
                      f"best baseline {top:.3f}, dualmap {dm:.3f}, ratio {dm / top if top else float('inf'):.2f}")
                break


if __name__ == "__main__":
    for n in sys.argv[2:]:
        summarize(sys.argv[1], n)
