"""Measures a running llama-server and prints a dualmap sim engine profile.

usage: python3 scripts/llama_profile.py URL SLOTS SLOT_CTX NAME > profile.json

URL is one llama-server (e.g. http://127.0.0.1:8001) started with --parallel
SLOTS --ctx-size SLOTS*SLOT_CTX --cache-ram 0 and nothing else running on it.
The numbers come from the server's own timings in each response:

- prefill: unique prompts (no cached prefix) of several lengths, one at a
  time; timings.prompt_ms over timings.prompt_n, fitted as
  a*tokens + b*tokens^2 (least squares; the quadratic term is attention).
- decode: B concurrent requests with short unique prompts generating 64
  tokens each (ignore_eos) for B = 1, 2, 4, ... up to SLOTS; the step time
  at batch B is timings.predicted_ms / predicted_n (each running sequence
  gets one token per step), fitted as base + per_seq*B.

KV bytes per token come from the model's shape (GET /props), the cache
capacity from SLOTS*SLOT_CTX tokens (what the slots hold; --cache-ram 0).
"""
import json
import random
import sys
import threading
import urllib.request


def post(url, body):
    req = urllib.request.Request(url + "/completion", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def words(rng, n):
    return " ".join(f"w{rng.randrange(1_000_000)}" for _ in range(n))


def tokens(url, text):
    req = urllib.request.Request(url + "/tokenize", data=json.dumps({"content": text}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return len(json.load(r)["tokens"])


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    url, slots, slot_ctx, name = sys.argv[1].rstrip("/"), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = random.Random(18)
    # Prefill at several lengths (cache_prompt off: every token computed).
    per_word = tokens(url, words(rng, 200)) / 200
    pts = []
    for target in (128, 256, 512, 1024, 2048, 3072):
        if target >= slot_ctx - 64:
            continue
        for _ in range(2):
            r = post(url, {"prompt": words(rng, int(target / per_word)), "n_predict": 1, "cache_prompt": False})
            t = r["timings"]
            pts.append((t["prompt_n"], t["prompt_ms"] / 1000))
    # least squares for y = a*n + b*n^2
    s11 = sum(n * n for n, _ in pts)
    s12 = sum(n ** 3 for n, _ in pts)
    s22 = sum(n ** 4 for n, _ in pts)
    y1 = sum(n * y for n, y in pts)
    y2 = sum(n * n * y for n, y in pts)
    det = s11 * s22 - s12 * s12
    a = (y1 * s22 - y2 * s12) / det
    b = (s11 * y2 - s12 * y1) / det
    if b < 0:  # no measurable attention term: a linear fit
        a, b = y1 / s11, 0.0
    # Decode at several batch sizes.
    batches, steps = [], []
    bsz = 1
    while bsz <= slots:
        out = [None] * bsz

        def one(i):
            out[i] = post(url, {"prompt": words(rng, 16), "n_predict": 64, "ignore_eos": True, "cache_prompt": False})

        th = [threading.Thread(target=one, args=(i,)) for i in range(bsz)]
        for x in th:
            x.start()
        for x in th:
            x.join()
        step = sum(o["timings"]["predicted_ms"] / o["timings"]["predicted_n"] for o in out) / bsz / 1000
        batches.append(bsz)
        steps.append(step)
        bsz *= 2
    n = len(batches)
    mx, my = sum(batches) / n, sum(steps) / n
    var = sum((x - mx) ** 2 for x in batches)
    per_seq = sum((x - mx) * (y - my) for x, y in zip(batches, steps)) / var if var else 0.0
    per_seq = max(per_seq, 0.0)
    base = max(my - per_seq * mx, 1e-5)
    with urllib.request.urlopen(url + "/props", timeout=30) as r:
        props = json.load(r)
    meta = props.get("model_path", "")
    # The generated model (scripts/llama.sh): 4 layers, 4 KV heads of 32: K
    # and V in f16.
    kv_bytes = 4 * 2 * 4 * 32 * 2
    prof = {
        "name": name,
        "model": "dualmap-tiny (scripts/llama.sh: random weights, 4 layers, width 256, Llama-2 vocab)",
        "hardware": "llama.cpp llama-server on CPU, 1 thread",
        "source": (f"measured by scripts/llama_profile.py against {meta or 'llama-server'}: prefill from "
                   f"timings.prompt_ms of unique prompts {min(p[0] for p in pts)}-{max(p[0] for p in pts)} tokens "
                   f"(fit a*n+b*n^2); decode step from timings.predicted_ms/predicted_n at batch sizes "
                   f"{','.join(map(str, batches))} ({', '.join(f'{1000 * s:.2f} ms' for s in steps)}); "
                   f"cache: {slots} slots x {slot_ctx} tokens (--cache-ram 0)"),
        "prefill_per_token_s": round(a, 8),
        "prefill_quadratic_s": b,
        "decode_step_base_s": round(base, 6),
        "decode_per_seq_s": round(per_seq, 6),
        "kv_bytes_per_token": kv_bytes,
        "hbm_cache_bytes": slots * slot_ctx * kv_bytes,
        "dram_cache_bytes": 0,
        "dram_load_per_token_s": 0,
        "max_batched_tokens": 2048,
        "max_num_seqs": slots,
        "max_model_len": slot_ctx,
        "block_size": 16,
    }
    print(json.dumps(prof, indent=2))


if __name__ == "__main__":
    main()
