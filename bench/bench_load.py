"""Benchmark: loading Llama-3.1 from a folder with `analysis.load` vs `tokenizers.Tokenizer.from_file` alone.

Both run in the same process, interleaved (A, B, A, B, ...), and the medians are compared.
Target: a first load (the process has not seen these bytes: `clear_shared()` before each) takes at most 1.5x the
time of the bare Rust load; loading the same bytes again (a second session, test or reload) at most 0.1x, as it
shares the first view's Rust tokenizer and document check.
Also printed (not part of the target): the first `.summary()` (parses the JSON document for the
summary card) and the Python memory the loaded view holds (tracemalloc).

Usage: python bench/bench_load.py [TOKENIZER_DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tokenizers  # noqa: E402
from _results import Run, variant_from  # noqa: E402

from analysis import load  # noqa: E402
from analysis.tokenizer.shared import clear_shared  # noqa: E402

ASSETS = Path(os.environ.get("TOKLAB_ASSETS", ROOT.parent / "shared" / "assets"))
TARGET = 1.5
TARGET_AGAIN = 0.1


def _time(fn) -> float:
    gc.collect()
    t0 = time.perf_counter()
    obj = fn()
    dt = time.perf_counter() - t0
    del obj
    return dt


def main() -> int:
    """Run the benchmark and print medians, the ratio and the target."""
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer", nargs="?", default=str(ASSETS / "tokenizers" / "llama-3.1"))
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))
    folder = Path(args.tokenizer)
    path = str(folder / "tokenizer.json")

    # warm the page cache and imports once (not counted)
    tokenizers.Tokenizer.from_file(path)
    load(folder)

    ours, base, again = [], [], []
    for _ in range(args.repeat):
        base.append(_time(lambda: tokenizers.Tokenizer.from_file(path)))
        clear_shared()
        ours.append(_time(lambda: load(folder)))
        first = load(
            folder
        )  # a view the process keeps (as a server's cache does) while the same file loads again
        again.append(_time(lambda: load(folder)))
        del first
    mo, mb, ma = statistics.median(ours), statistics.median(base), statistics.median(again)
    ratio, ratio_again = mo / mb, ma / mb

    tok = load(folder)
    t0 = time.perf_counter()
    s = tok.summary()
    t_summary = time.perf_counter() - t0

    tracemalloc.start()
    kept = load(folder)
    cur, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del kept

    print(
        f"{folder.name}: vocab_size={s['vocab_size']} merges={s['merges']} ({os.path.getsize(path) / 1e6:.1f} MB JSON)"
    )
    print(
        f"tokenizers.Tokenizer.from_file : median {mb:.3f} s  (runs: {', '.join(f'{x:.3f}' for x in base)})"
    )
    print(
        f"analysis.load(folder)          : median {mo:.3f} s  (runs: {', '.join(f'{x:.3f}' for x in ours)})"
    )
    print(
        f"analysis.load, the same bytes again: median {ma:.3f} s  (runs: {', '.join(f'{x:.3f}' for x in again)})"
    )
    print(f"ratio {ratio:.2f}x (target <= {TARGET}x) -> {'OK' if ratio <= TARGET else 'OVER TARGET'}")
    ok_again = ratio_again <= TARGET_AGAIN
    print(
        f"again: ratio {ratio_again:.3f}x (target <= {TARGET_AGAIN}x) -> {'OK' if ok_again else 'OVER TARGET'}"
    )
    print(f"first .summary() (parses the JSON document): {t_summary:.3f} s (not in the ratio)")
    print(f"Python memory held by the loaded view: {cur / 1e6:.1f} MB (tracemalloc; Rust side not counted)")
    met = ratio <= TARGET and ok_again
    run.write({"tokenizer": folder.name, "repeat": args.repeat, "rust_load_s": round(mb, 4),
               "first_load_s": round(mo, 4), "again_s": round(ma, 4), "first_load_ratio": round(ratio, 3),
               "again_ratio": round(ratio_again, 4), "summary_s": round(t_summary, 3),
               "python_memory_mb": round(cur / 1e6, 1)},
              targets={"first_load_ratio": f"<= {TARGET}", "again_ratio": f"<= {TARGET_AGAIN}"}, met=met)  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
