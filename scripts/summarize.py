"""Summarises the JSON reports of scripts/evaluate.sh.

For each report: goodput per policy and queue mode, DualMap's goodput over
the best baseline's, and, at the first swept rate where the best baseline's
SLO attainment is below 50%, DualMap's attainment over it.

usage: python3 scripts/summarize.py OUTDIR NAME...
       python3 scripts/summarize.py --table QUEUE QPS,QPS,... OUTDIR NAME [POLICY,...]
         (a Markdown table of one report at the given rates, seeds averaged,
         as in docs/evaluation.md)
       python3 scripts/summarize.py --bounds OUTDIR
         (the matrix's bounds, one row per workload and a work-bound column per engine model)
       python3 scripts/summarize.py --targets OUTDIR
         (issue 13's targets on the realistic engine: DualMap over the best baseline
         with 1 router and 4 routers at 500 ms, identical prompts against
         least-loaded, attainment at 1.2x the best baseline's goodput from OUTDIR/att)
       python3 scripts/summarize.py --overload-rate REPORT.json
         (1.2x the best baseline's goodput of one report, router mode)
       python3 scripts/summarize.py --matrix OUTDIR
         (the workload matrix of scripts/evaluate.sh, OUTDIR/m/WORKLOAD-ROUTERS-ENGINE.json:
         a goodput table per workload and the summary table, in Markdown)
"""
import collections
import glob
import json
import os
import re
import sys


def summarize(path, name):
    rep = json.load(open(f"{path}/{name}.json"))
    print(f"== {name}: {rep['trace']} requests={rep['requests']} instances={rep['instances']} "
          f"replicas={rep['replicas']} upper-bound hit rate={rep['upper_bound_hit_rate']:.3f} "
          f"prefill bound={rep.get('prefill_bound_qps', 0):.2f} QPS (cheapest 90%: {rep.get('prefill_bound_90_qps', 0):.2f}, "
          f"50%: {rep.get('prefill_bound_50_qps', 0):.2f}) work bound={rep.get('work_bound_qps', 0):.2f} QPS "
          f"(cheapest 90%: {rep.get('work_bound_90_qps', 0):.2f})")
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


MATRIX_NAME = re.compile(r"^(?P<w>.+)-(?P<r>r1|r4s[^-]+)-(?P<e>[^-]+)$")


def router_label(r):
    return "1 router" if r == "r1" else f"4 routers, {r[3:]} sync"


def goodput_cell(g, bound):
    """A goodput figure with its marks: >= at or above the highest swept rate,
    <x below 90% at the lowest swept rate x, ! above the 90% prefill bound (a bug)."""
    if g is None:
        return "-"
    q = g["qps"]
    mark = ""
    note = g.get("note", "")
    if note.startswith("at or above"):
        mark = ">="
    elif note.startswith("below"):
        mark = "<"
        q = g.get("lowest", q)  # below the lowest swept rate: print that rate
    cell = f"{mark}{q:.2f}"
    if g.get("seeds"):
        cell += f" ({g['seeds']['min']:.2f}-{g['seeds']['max']:.2f})"
    if bound is not None and bound >= 0 and q > bound + 1e-9:
        cell += " !"
    return cell


def load_matrix(path):
    reps = {}
    for f in sorted(glob.glob(os.path.join(path, "m", "*.json"))):
        m = MATRIX_NAME.match(os.path.basename(f)[:-5])
        if not m:
            continue
        rep = json.load(open(f))
        low = {}
        for r in rep["runs"]:
            k = (r["policy"], r["queue"])
            low[k] = min(low.get(k, r["qps"]), r["qps"])
        for g in rep["goodput"]:
            g["lowest"] = low.get((g["policy"], g["queue"]), g["qps"])
        reps[(m["w"], m["r"], m["e"])] = rep
    return reps


def ordered(keys, first):
    """keys in first's order, then the rest sorted."""
    return [k for k in first if k in keys] + sorted(k for k in keys if k not in first)


def matrix(path):
    reps = load_matrix(path)
    if not reps:
        print(f"no matrix reports in {path}/m")
        return
    workload_order = ["conv", "agent", "fixed", "hot-prefix", "chat", "bursts", "slo-mix", "conv-imperfect"]
    workloads = ordered({w for w, _, _ in reps}, workload_order)
    routers = ordered({r for _, r, _ in reps}, ["r1", "r4s500ms", "r4s2s"])
    engines = ordered({e for _, _, e in reps}, ["default", "legacy"])
    policy_order = ["dualmap", "dualmap-paper", "preble", "min-ttft", "least-loaded", "consistent-hash-bounded-load",
                    "cache-affinity", "round-robin", "random"]
    summary = []
    for w in workloads:
        cols = [(r, e) for e in engines for r in routers if (w, r, e) in reps]
        any_rep = reps[(w, cols[0][0], cols[0][1])]
        print(f"### {w}: {any_rep['trace']}\n")
        print(f"{any_rep['requests']} requests ({any_rep['warmup']} warm-up), {any_rep['instances']} instances, "
              f"profile {any_rep['profile']}, SLO {any_rep['slo_seconds']:g} s"
              + (f", imperfect information: {any_rep['information']}" if any_rep.get("information") else "") + ".\n")
        print("| engine | upper-bound hit rate | prefill bound (all / 90% / 50%) | work bound (all / 90%) |")
        print("|---|---|---|---|")
        for e in engines:
            rep = next((reps[(w, r, e)] for r in routers if (w, r, e) in reps), None)
            if rep is None:
                continue
            b = lambda k: "none" if rep.get(k, 0) < 0 else f"{rep.get(k, 0):.2f}"
            print(f"| {e} | {100 * rep['upper_bound_hit_rate']:.1f}% | {b('prefill_bound_qps')} / {b('prefill_bound_90_qps')} / "
                  f"{b('prefill_bound_50_qps')} | {b('work_bound_qps')} / {b('work_bound_90_qps')} |")
        print()
        print("| policy | queue | " + " | ".join(f"{router_label(r)}, engine {e}" for r, e in cols) + " |")
        print("|---|---|" + "---|" * len(cols))
        rows = collections.OrderedDict()
        for (r, e) in cols:
            for g in reps[(w, r, e)]["goodput"]:
                rows.setdefault((g["policy"], g["queue"]), {})[(r, e)] = g
        keys = sorted(rows, key=lambda k: (k[1] != "router", policy_order.index(k[0]) if k[0] in policy_order else 99, k[0]))
        for (pol, q) in keys:
            cells = [goodput_cell(rows[(pol, q)].get(c), reps[(w, c[0], c[1])].get("prefill_bound_90_qps")) for c in cols]
            print(f"| {pol} | {q} | " + " | ".join(cells) + " |")
        print()
        for (r, e) in cols:
            gp = {g["policy"]: g for g in reps[(w, r, e)]["goodput"] if g["queue"] == "router"}
            summary.append((w, r, e, gp, reps[(w, r, e)].get("prefill_bound_90_qps")))
    pols = ordered({p for *_, gp, _ in summary for p in gp}, policy_order)
    print("### Summary: goodput (QPS at >= 90% SLO attainment), router mode\n")
    print("`>=`: at or above the highest swept rate; `<x`: below 90% already at the lowest swept rate x; `!`: above the 90% prefill bound (a bug); "
          "4-router figures are means over seeds (single seeds in parentheses in the tables above).\n")
    print("| workload | routers | engine | " + " | ".join(pols) + " | best baseline | DualMap / best |")
    print("|---|---|---|" + "---|" * len(pols) + "---|---|")
    for w, r, e, gp, bound in summary:
        cells = []
        for p in pols:
            g = gp.get(p)
            cells.append("-" if g is None else goodput_cell(dict(g, seeds=None), bound))
        base = {p: g["qps"] for p, g in gp.items() if not p.startswith("dualmap")}
        best = max(base, key=base.get) if base else None
        ratio = "-"
        if best and base[best] > 0 and "dualmap" in gp:
            ratio = f"{gp['dualmap']['qps'] / base[best]:.3f}"
        elif best and "dualmap" in gp:
            ratio = "inf" if gp["dualmap"]["qps"] > 0 else "-"
        bcell = f"{best} {base[best]:.2f}" if best else "-"
        print(f"| {w} | {router_label(r)} | {e} | " + " | ".join(cells) + f" | {bcell} | {ratio} |")


def best_baseline(rep, queue="router"):
    """(policy, goodput) of the best baseline (not a dualmap variant) of a report."""
    base = {g["policy"]: g["qps"] for g in rep["goodput"] if g["queue"] == queue and not g["policy"].startswith("dualmap")}
    if not base:
        return None, 0.0
    best = max(base, key=base.get)
    return best, base[best]


def overload_rate(path):
    """Issue 13's overload rate: 1.2x the best baseline's goodput (router mode)."""
    _, q = best_baseline(json.load(open(path)))
    if q <= 0:
        sys.exit(f"{path}: no baseline with a positive goodput")
    print(f"{1.2 * q:.2f}")


def bounds(path):
    """One row per workload: the bounds of scripts/evaluate.sh's matrix, per engine model."""
    reps = load_matrix(path)
    order = ["conv", "agent", "fixed", "hot-prefix", "chat", "bursts", "slo-mix", "conv-imperfect"]
    engines = ordered({e for _, _, e in reps}, ["default", "legacy"])
    b = lambda rep, k: "none" if rep.get(k, 0) < 0 else f"{rep.get(k, 0):.2f}"
    print("| workload | upper-bound hit rate | prefill bound: all / 90% / 50% | "
          + " | ".join(f"work bound, engine {e}: all / 90% / 50%" for e in engines) + " |")
    print("|---|---|---|" + "---|" * len(engines))
    for w in ordered({k[0] for k in reps}, order):
        cells = []
        first = None
        for e in engines:
            rep = next((reps[k] for k in sorted(reps) if k[0] == w and k[2] == e), None)
            if rep is None:
                cells.append("-")
                continue
            first = first or rep
            cells.append(f"{b(rep, 'work_bound_qps')} / {b(rep, 'work_bound_90_qps')} / {b(rep, 'work_bound_50_qps')}")
        print(f"| {w} | {100 * first['upper_bound_hit_rate']:.1f}% | {b(first, 'prefill_bound_qps')} / "
              f"{b(first, 'prefill_bound_90_qps')} / {b(first, 'prefill_bound_50_qps')} | " + " | ".join(cells) + " |")


def targets(path):
    """Issue 13's targets on the realistic engine, from the matrix and OUTDIR/att."""
    reps = load_matrix(path)
    order = ["conv", "agent", "fixed", "hot-prefix", "chat", "bursts", "slo-mix", "conv-imperfect"]
    print("| workload | 1 router: dualmap / best baseline (>= 0.97) | 4 routers, 500 ms: dualmap / best baseline (>= 1.1) "
          "| 1.1x best (4 routers) vs 90% prefill / work bound, and the best goodput of any policy with 1 router | attainment at 1.2x best goodput (1 router): dualmap vs best baseline |")
    print("|---|---|---|---|---|")
    for w in ordered({k[0] for k in reps}, order):
        cells = []
        for r, goal in (("r1", 0.97), ("r4s500ms", 1.1)):
            rep = reps.get((w, r, "default"))
            if rep is None:
                cells.append("-")
                continue
            gp = {g["policy"]: g["qps"] for g in rep["goodput"] if g["queue"] == "router"}
            best, bq = best_baseline(rep)
            dm = gp.get("dualmap", 0)
            ratio = dm / bq if bq else float("inf")
            cell = f"{dm:.2f} / {bq:.2f} {best} = {ratio:.3f}: {'met' if ratio >= goal else 'unmet'}"
            if w == "fixed" and "least-loaded" in gp:
                ll = gp["least-loaded"]
                rl = dm / ll if ll else float("inf")
                cell += f"; vs least-loaded {ll:.2f} = {rl:.3f}: {'met' if rl >= 0.9 else 'unmet'} (>= 0.9)"
            cells.append(cell)
        rep4 = reps.get((w, "r4s500ms", "default"))
        if rep4 is not None:
            _, bq = best_baseline(rep4)
            pb, wb = rep4.get("prefill_bound_90_qps", -1), rep4.get("work_bound_90_qps", -1)
            fmt = lambda b: "none" if b < 0 else f"{b:.2f}"
            reach = "ruled out" if (0 <= pb < 1.1 * bq) or (0 <= wb < 1.1 * bq) else "not ruled out"
            cell = f"{1.1 * bq:.2f} vs {fmt(pb)} / {fmt(wb)}: {reach}"
            one = reps.get((w, "r1", "default"))
            if one is not None:
                top = max((g["qps"], g["policy"]) for g in one["goodput"] if g["queue"] == "router")
                cell += f"; best 1-router goodput {top[0]:.2f} {top[1]}"
            cells.append(cell)
        else:
            cells.append("-")
        att = os.path.join(path, "att", f"{w}.json")
        r1 = reps.get((w, "r1", "default"))
        if os.path.exists(att) and r1 is not None:
            a = json.load(open(att))
            best, _ = best_baseline(r1)
            by = {r["policy"]: r["slo_attainment"] for r in a["runs"] if r["queue"] == "router"}
            top = max((v, k) for k, v in by.items() if not k.startswith("dualmap"))
            dm, bb = by.get("dualmap", 0), by.get(best, 0)
            cells.append(f"{a['runs'][0]['qps']:.2f} QPS: {100 * dm:.1f}% vs {100 * bb:.1f}% {best}: "
                         f"{'met' if dm >= bb else 'unmet'} (highest baseline {100 * top[0]:.1f}% {top[1]})")
        else:
            cells.append("-")
        print(f"| {w} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1] == "--bounds":
        bounds(sys.argv[2])
    elif sys.argv[1] == "--targets":
        targets(sys.argv[2])
    elif sys.argv[1] == "--overload-rate":
        overload_rate(sys.argv[2])
    elif sys.argv[1] == "--matrix":
        matrix(sys.argv[2])
    elif sys.argv[1] == "--table":
        table(*sys.argv[2:7])
    else:
        for n in sys.argv[2:]:
            summarize(sys.argv[1], n)
