"""Summarises the JSON reports of scripts/evaluate.sh.

For each report: goodput per policy and queue mode, DualMap's goodput over
the best baseline's, and, at the first swept rate where the best baseline's
SLO attainment is below 50%, DualMap's attainment over it.

usage: python3 scripts/summarize.py OUTDIR NAME...
       python3 scripts/summarize.py --table QUEUE QPS,QPS,... OUTDIR NAME [POLICY,...]
         (a Markdown table of one report at the given rates, seeds averaged,
         as in docs/evaluation.md)
"""
import collections
import json
import sys


def summarize(path, name):
    rep = json.load(open(f"{path}/{name}.json"))
    print(f"== {name}: {rep['trace']} requests={rep['requests']} instances={rep['instances']} "
          f"replicas={rep['replicas']} upper-bound hit rate={rep['upper_bound_hit_rate']:.3f} "
          f"prefill bound={rep.get('prefill_bound_qps', 0):.2f} QPS work bound={rep.get('work_bound_qps', 0):.2f} QPS")
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
        seeds = {g["policy"]: g["seeds"] for g in rep["goodput"] if g["queue"] == queue and g.get("seeds")}
        for k in ("dualmap", best):
            if k in seeds:
                print(f"  [{queue}] {k}: single seeds {seeds[k]['min']:.2f}-{seeds[k]['max']:.2f}")
        sums = collections.defaultdict(lambda: collections.defaultdict(list))
        for r in rep["runs"]:
            if r["queue"] == queue:
                sums[r["qps"]][r["policy"]].append(r["slo_attainment"])
        att = {q: {k: sum(v) / len(v) for k, v in byp.items()} for q, byp in sums.items()}
        for qps in sorted(att):
            top = max(v for k, v in att[qps].items() if not k.startswith("dualmap"))
            if top < 0.5:
                dm = att[qps].get("dualmap", 0)
                print(f"  [{queue}] first QPS where the best baseline is below 50%: {qps}: "
                      f"best baseline {top:.3f}, dualmap {dm:.3f}, ratio {dm / top if top else float('inf'):.2f}")
                break


def table(queue, rates, path, name, policies=None):
    """Rows at the given rates; several seeds of one point are averaged
    (attainment as mean and spread, the rest as means)."""
    rep = json.load(open(f"{path}/{name}.json"))
    want = [float(x) for x in rates.split(",")]
    keep = policies.split(",") if policies else None
    print("| policy | QPS | SLO att. | TTFT p50 | p90 | p99 | E2E p50 | hit rate | load CV | migrations | failed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    points = collections.OrderedDict()
    for r in rep["runs"]:
        if r["queue"] != queue or not any(abs(r["qps"] - w) < 1e-9 for w in want):
            continue
        if keep and r["policy"] not in keep:
            continue
        points.setdefault(r["policy"], collections.OrderedDict()).setdefault(r["qps"], []).append(r)
    for pol, byq in points.items():
        for q, rs in byq.items():
            m = lambda k: sum(r[k] for r in rs) / len(rs)
            att = f"{100 * m('slo_attainment'):.1f}%"
            if len(rs) > 1:
                att += f" ±{50 * (max(r['slo_attainment'] for r in rs) - min(r['slo_attainment'] for r in rs)):.1f}"
            print(f"| {pol} | {q:g} | {att} | {m('ttft_p50_s'):.2f} | "
                  f"{m('ttft_p90_s'):.2f} | {m('ttft_p99_s'):.2f} | {m('e2e_p50_s'):.1f} | "
                  f"{100 * m('cache_hit_rate'):.1f}% | {m('load_cv'):.2f} | {m('migrations'):.0f} | {m('failed'):.0f} |")
    gp = sorted(((g["policy"], g["qps"]) for g in rep["goodput"] if g["queue"] == queue), key=lambda kv: -kv[1])
    print()
    print(f"Goodput ({queue} mode): " + ", ".join(f"{k} ~{v:.2f}" for k, v in gp))


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        table(*sys.argv[2:7])
    else:
        for n in sys.argv[2:]:
            summarize(sys.argv[1], n)
