"""Benchmark: incremental dynamic-tokenization merging vs the recount-every-iteration baseline, same run.

A batch of FLORES-200 devtest sentences (several languages) is tokenized once; then `merge_incremental`
(maintained pair counts + pair → positions index) and `merge_naive` (Algorithm 1 as written: recount every
valid pair of the batch at every iteration) each run `--merges` merges with a pre-warmed validity memo (so
only the loop is timed) and once more from a cold memo (end to end). The outputs must be identical.

Usage: python bench/bench_dynamic.py [--tokenizers gpt2,llama-2,llama-3.1] [--lang est_Latn] [--batch 64]
       [--merges 100] [--boundary pretokens] [--exhaust llama-2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402

from analysis import load  # noqa: E402
from analysis.methods.dynamic import PairRules, base_tokenize, merge_incremental, merge_naive  # noqa: E402

ASSETS = Path(os.environ.get("TOKLAB_ASSETS", ROOT.parent / "shared" / "assets"))
TARGET = 3.0  # incremental at least 3x faster than the naive recount at 64 x 100


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    """Run the benchmark; exit status 1 if the two implementations disagree."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizers", default="gpt2,llama-2,llama-3.1")
    ap.add_argument("--lang", default="est_Latn")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--merges", type=int, default=100)
    ap.add_argument("--boundary", default="pretokens")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--exhaust", default="llama-2", help="tokenizer for the run-to-exhaustion case ('' to skip)"
    )
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))
    found = []
    lines = (
        (ASSETS / "flores200" / "devtest" / f"{args.lang}.devtest").read_text(encoding="utf-8").splitlines()
    )
    texts = lines[: args.batch]
    ok = True
    ratios = []
    b, m = args.boundary, args.merges
    for name in [n for n in args.tokenizers.split(",") if n]:
        tok = load(ASSETS / "tokenizers" / name)
        seqs, _, _ = base_tokenize(tok, texts)
        n_tok = sum(map(len, seqs))
        PairRules(tok, b).valid("a", "b")  # first-call set-up of the Rust pre-tokenizer, outside the timings
        # end to end from a cold validity memo
        cold_inc, _ = _best(lambda s=seqs, t=tok: merge_incremental(s, PairRules(t, b), m), 1)
        cold_naive, _ = _best(lambda s=seqs, t=tok: merge_naive(s, PairRules(t, b), m), 1)
        rules = PairRules(tok, b)
        merge_naive(seqs, rules, m)  # warm the memo for both
        t_inc, inc = _best(lambda s=seqs, r=rules: merge_incremental(s, r, m), args.repeat)
        t_naive, naive = _best(lambda s=seqs, r=rules: merge_naive(s, r, m), args.repeat)
        same = inc[0] == naive[0] and [x.__dict__ for x in inc[2]] == [x.__dict__ for x in naive[1]]
        ok &= same
        tracemalloc.start()
        merge_incremental(seqs, rules, args.merges)
        peak_inc = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        tracemalloc.start()
        merge_naive(seqs, rules, args.merges)
        peak_naive = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        ratio = t_naive / t_inc
        ratios.append(ratio)
        found.append({"tokenizer": name, "incremental_ms": round(t_inc * 1000, 2), "naive_ms": round(t_naive * 1000, 2),
                      "speedup": round(ratio, 2), "peak_mb_incremental": round(peak_inc / 1e6, 3),
                      "peak_mb_naive": round(peak_naive / 1e6, 3), "identical": same})  # fmt: skip
        after = sum(map(len, inc[0]))
        print(
            f"{name:>16}: {len(texts)} sentences, {n_tok} → {after} tokens after {len(inc[2])} merges | "
            f"incremental {t_inc * 1000:.1f} ms vs naive {t_naive * 1000:.1f} ms → {ratio:.1f}x faster "
            f"(cold memo: {cold_inc * 1000:.1f} vs {cold_naive * 1000:.1f} ms) | peak memory "
            f"{peak_inc / 1e6:.2f} vs {peak_naive / 1e6:.2f} MB | identical: {same}"
        )
    if args.exhaust:
        # the page's full curve: merge until no valid pair is left (long tail of count-1 ties)
        tok = load(ASSETS / "tokenizers" / args.exhaust)
        ru = (ASSETS / "flores200" / "devtest" / "rus_Cyrl.devtest").read_text(encoding="utf-8").splitlines()
        seqs, _, _ = base_tokenize(tok, ru[: args.batch])
        rules = PairRules(tok, b)
        t_inc, inc = _best(lambda: merge_incremental(seqs, rules, 100_000), 1)
        t_naive, naive = _best(lambda: merge_naive(seqs, rules, 100_000), 1)
        same = inc[0] == naive[0] and len(inc[2]) == len(naive[1])
        ok &= same
        print(
            f"{args.exhaust:>16}: {len(seqs)} rus_Cyrl sentences to exhaustion ({len(inc[2])} merges, "
            f"{sum(map(len, seqs))} → {sum(map(len, inc[0]))} tokens) | incremental {t_inc:.2f} s vs naive "
            f"{t_naive:.2f} s → {t_naive / t_inc:.1f}x faster | identical: {same}"
        )
        ratios.append(t_naive / t_inc)
        found.append({"tokenizer": f"{args.exhaust} (rus_Cyrl, to exhaustion)", "merges": len(inc[2]),
                      "incremental_ms": round(t_inc * 1000, 1), "naive_ms": round(t_naive * 1000, 1),
                      "speedup": round(t_naive / t_inc, 2), "identical": same})  # fmt: skip
    worst = min(ratios) if ratios else 0.0
    print(f"speed-up {worst:.1f}x at worst (target >= {TARGET:.0f}x) · outputs identical: {ok}")
    run.write({"lang": args.lang, "batch": args.batch, "merges": args.merges, "runs": found,
               "worst_speedup": round(worst, 2), "identical": ok},
              targets={"worst_speedup": f">= {TARGET:g}", "identical": True}, met=ok and worst >= TARGET)  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
