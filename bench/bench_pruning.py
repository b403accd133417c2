"""Benchmark pruning: the full leaf-frequency order for Llama-3.1, and a 20-point bytes/token curve.

Run: `python bench/bench_pruning.py [--tokenizer DIR] [--points 20]`. Baselines measured in the same run:
* order: a plain dict/set implementation of paper 000 Alg. 1 (what a direct transcription does);
* curve: pruning each N from scratch (`pruning.prune`, which re-parses the tokenizer every time) on a few
  points, scaled to the same number of points.
Peak memory: tracemalloc (Python allocations) in a separate traced run, plus the process max RSS.
"""

from __future__ import annotations

import argparse
import heapq
import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402

from analysis import load  # noqa: E402
from analysis.bpe import vocabulary_structure  # noqa: E402
from analysis.core.paths import shared_assets as assets_dir  # noqa: E402
from analysis.methods import pruning as P  # noqa: E402


def rss_mb() -> float:
    """Process peak resident set size so far (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def traced_peak_mb(fn) -> float:
    """Peak Python allocation (MB) while running fn once under tracemalloc."""
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1e6


def baseline_leaf_frequency(tok, counts, vs, prot) -> list[int]:
    """Direct transcription of Alg. 1 with dicts and sets (the baseline)."""
    freq = {i: int(counts[i]) if i < len(counts) else 0 for i in tok.id_to_token}
    downstream = dict(vs.downstream)
    in_vocab = set(tok.vocab.values())
    heap = [(freq[x], -x) for x in vs.leaves if x not in vs.atomic and x in in_vocab]
    heapq.heapify(heap)
    done: set[int] = set()
    out = []
    while heap:
        f, nx = heapq.heappop(heap)
        x = -nx
        if x in done or downstream.get(x, 0) > 0 or x in vs.atomic:
            continue
        if f != freq[x]:
            heapq.heappush(heap, (freq[x], nx))
            continue
        done.add(x)
        if x in prot:
            continue
        out.append(x)
        if x in vs.split:
            a, b = vs.split[x]
            for p in (a, b):
                freq[p] += f
                downstream[p] -= 1
            freq[x] = 0
            for p in {a, b}:
                if downstream[p] <= 0 and p not in vs.atomic and p not in done:
                    heapq.heappush(heap, (freq[p], -p))
    return out


def main() -> int:
    """Run both benchmarks and print times, ratios, targets and memory."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default=str(assets_dir() / "tokenizers" / "llama-3.1"))
    ap.add_argument("--points", type=int, default=20)
    ap.add_argument("--baseline-points", type=int, default=3)
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))
    flores = assets_dir() / "flores200" / "devtest"
    et = (flores / "est_Latn.devtest").read_text(encoding="utf-8").splitlines()
    en = (flores / "eng_Latn.devtest").read_text(encoding="utf-8").splitlines()

    tok = load(args.tokenizer)
    print(f"tokenizer {tok.name}: {tok.vocab_size:,} tokens, {len(tok.merges):,} merges")
    mix = P.mix_texts([et[:800], en[:800]], by="lines")
    print(f"machine load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (timings scale with it)")
    t0 = time.perf_counter()
    counts = P.token_counts(tok, mix)
    t_counts = time.perf_counter() - t0
    t0 = time.perf_counter()
    vs = vocabulary_structure(tok)
    t_struct = time.perf_counter() - t0
    prot = P.protected_ids(tok)
    print(
        f"[prep] corpus counts {t_counts:.2f} s; vocabulary structure (STT + splits, cached) {t_struct:.2f} s"
    )

    # ---------------------------------------------------------------- 1. leaf-frequency order
    P.leaf_frequency_order(tok, counts, structure=vs, protected=prot)  # warm the per-structure arrays
    t0, c0 = time.perf_counter(), time.process_time()
    order = P.leaf_frequency_order(tok, counts, structure=vs, protected=prot)
    t_order, cpu_order = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    base = baseline_leaf_frequency(tok, counts, vs, prot)
    t_base, cpu_base = time.perf_counter() - t0, time.process_time() - c0
    assert base == list(order.ids), "baseline and implementation disagree"
    mem_order = traced_peak_mb(lambda: P.leaf_frequency_order(tok, counts, structure=vs, protected=prot))
    print(
        f"[order] leaf-frequency, {len(order):,} tokens: {t_order:.2f} s (target <= 5 s: "
        f"{'OK' if t_order <= 5 else 'MISSED'}); baseline dict/set Alg. 1 {t_base:.2f} s; "
        f"ratio {t_order / t_base:.2f}x of baseline; CPU time {cpu_order:.2f} s vs {cpu_base:.2f} s; "
        f"peak Python memory {mem_order:.1f} MB; max RSS {rss_mb():.0f} MB"
    )

    # ---------------------------------------------------------------- 2. bytes/token curve
    held = {"est_Latn": et[800:], "eng_Latn": en[800:]}
    ns = P.curve_points(min(len(order), 112_000), args.points)
    t0, c0 = time.perf_counter(), time.process_time()
    pts = P.prune_curve(tok, order, ns, held, stt=False)
    t_curve, cpu_curve = time.perf_counter() - t0, time.process_time() - c0
    bl_ns = ns[1 :: max(1, len(ns) // args.baseline_points)][: args.baseline_points]
    t0 = time.perf_counter()
    for n in bl_ns:
        r = P.prune(tok, order.prefix(n))
        for lines in held.values():
            P.bytes_per_token(r.tokenizer, lines)
    t_bl = (time.perf_counter() - t0) / len(bl_ns) * len(ns)
    mem_curve = traced_peak_mb(lambda: P.prune_curve(tok, order, ns[:3], held, stt=False))
    print(
        f"[curve] {len(ns)} points x {len(held)} languages: {t_curve:.2f} s (target <= 30 s: "
        f"{'OK' if t_curve <= 30 else 'MISSED'}); baseline prune-from-scratch {t_bl:.2f} s (scaled from "
        f"{len(bl_ns)} points); ratio {t_curve / t_bl:.2f}x of baseline; CPU time {cpu_curve:.2f} s "
        f"(Rust encoding threads included); peak Python memory (3 points) "
        f"{mem_curve:.1f} MB; max RSS {rss_mb():.0f} MB"
    )
    for p in pts[:: max(1, len(pts) // 5)]:
        print(f"    N={p.n:>7,}  " + "  ".join(f"{k} {v:.3f}" for k, v in p.bytes_per_token.items()))
    run.write({"tokenizer": tok.name, "order_tokens": len(order), "leaf_frequency_order_s": round(t_order, 3),
               "order_baseline_s": round(t_base, 3), "curve_points": len(ns), "curve_s": round(t_curve, 2),
               "curve_baseline_s": round(t_bl, 2), "order_peak_python_mb": round(mem_order, 1),
               "curve": [{"n": p.n, **{k: round(v, 4) for k, v in p.bytes_per_token.items()}} for p in pts]},
              targets={"leaf_frequency_order_s": "<= 5", "curve_s": "<= 30"},
              met=t_order <= 5 and t_curve <= 30)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
