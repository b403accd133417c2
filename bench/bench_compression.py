"""Benchmark the compression grid (issue 4), all in one run:

1. all FLORES languages for one tokenizer through `grid.compression_table` (cold, no cache) vs a bare
   `tokenizer.encode_batch(lines, add_special_tokens=False)` over the same lines (target <= 1.3x);
2. the same request again from the cache: in memory, and in a fresh process from the on-disk JSON
   (imports and tokenizer load not timed; target <= 0.5 s);
3. peak memory (RSS, child process) for 8 tokenizers x all languages (target < 2 GB).

Timings interleave baseline and ours and keep the best of `--repeat` runs (the machine is shared).
Usage: python bench/bench_compression.py [--tokenizer llama-3.1] [--langs N] [--repeat 2] [--skip-memory]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402

from analysis import load  # noqa: E402
from analysis.measure import grid  # noqa: E402
from analysis.texts import flores  # noqa: E402

ASSETS = Path(os.environ.get("TOKLAB_ASSETS", ROOT.parent / "shared" / "assets")).resolve()
MEMORY_TOKENIZERS = ["llama-3.1", "qwen3", "gemma", "mistral-nemo", "llama-2", "gpt2", "mistral-7b-v0.3",
                     "smollm2-135m-instruct"]  # fmt: skip


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_child(n_langs: int | None) -> None:
    """Run 8 tokenizers x languages in this (child) process and print its peak RSS as JSON."""
    data = flores.open_flores(ASSETS / "flores200")
    codes = data.codes[:n_langs] if n_langs else data.codes
    before = _rss_mb()
    toks = [load(ASSETS / "tokenizers" / n) for n in MEMORY_TOKENIZERS]
    t0 = time.perf_counter()
    rows = grid.compression_table(toks, data, codes)
    dt = time.perf_counter() - t0
    print(json.dumps({"rows": len(rows), "seconds": dt, "rss_start_mb": before, "peak_rss_mb": _rss_mb()}))


def cache_child(tokenizer: str, n_langs: int | None) -> None:
    """In a fresh process (imports and tokenizer load not timed): the same request answered from disk."""
    tok = load(ASSETS / "tokenizers" / tokenizer)
    t0 = time.perf_counter()
    data = flores.open_flores(ASSETS / "flores200")
    codes = data.codes[:n_langs] if n_langs else data.codes
    rows = grid.compression_table([tok], data, codes)
    dt = time.perf_counter() - t0
    print(
        json.dumps(
            {"rows": len(rows), "seconds": dt, "bytes_per_token": [r["bytes_per_token"] for r in rows]}
        )
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default="llama-3.1")
    ap.add_argument("--langs", type=int, default=None, help="first N languages only (default: all 204)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cache-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cache_child:
        cache_child(args.tokenizer, args.langs)
        return 0
    run = Run(__file__, variant=variant_from(ap, args))
    tmp = tempfile.mkdtemp(prefix="toklab-bench-")
    os.environ["TOKLAB_CACHE"] = tmp  # a fresh cache: the cold run really computes (children inherit it)
    if args.memory_child:
        memory_child(args.langs)
        return 0

    data = flores.open_flores(ASSETS / "flores200")
    codes = data.codes[: args.langs] if args.langs else data.codes
    tok = load(ASSETS / "tokenizers" / args.tokenizer)
    texts = [data.lines(c) for c in codes]  # read once; both sides use the same in-memory lines
    n_lines = sum(map(len, texts))
    rust = tok.tokenizer
    rust.encode_batch(texts[0][:8], add_special_tokens=False)  # warm the thread pool
    print(f"tokenizer {tok.name} · {len(codes)} languages · {n_lines:,} lines · {os.cpu_count()} CPUs")

    base, ours = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for lines in texts:
            rust.encode_batch(lines, add_special_tokens=False)
        base.append(time.perf_counter() - t0)
        grid.clear_cache(disk=True)
        data._hash.clear()  # recompute data hashes too: part of a cold request
        flores._HASH_MEMO = {}
        (flores.flores_cache_dir() / "data-hashes.json").unlink(missing_ok=True)
        t0 = time.perf_counter()
        rows = grid.compression_table([tok], data, codes)
        ours.append(time.perf_counter() - t0)
    b, o = min(base), min(ours)
    print(f"[1] bare encode_batch {b:.2f} s · compression_table (cold, all metrics) {o:.2f} s "
          f"· ratio {o / b:.2f}x (target <= 1.3x)  [runs: base {', '.join(f'{x:.2f}' for x in base)}; "
          f"ours {', '.join(f'{x:.2f}' for x in ours)}]")  # fmt: skip

    t0 = time.perf_counter()
    again = grid.compression_table([tok], data, codes)
    t_mem = time.perf_counter() - t0
    assert again == rows
    cmd = [sys.executable, __file__, "--cache-child", "--tokenizer", args.tokenizer]
    cmd += ["--langs", str(args.langs)] if args.langs else []
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ})
    res = json.loads(out.stdout.strip().splitlines()[-1])
    t_disk = res["seconds"]
    assert res["rows"] == len(rows) and res["bytes_per_token"] == [r["bytes_per_token"] for r in rows]
    print(f"[2] same request from cache: in memory {t_mem:.3f} s · fresh process, on-disk JSON "
          f"{res['seconds']:.3f} s (target <= 0.5 s)")  # fmt: skip

    figures = {"tokenizer": tok.name, "languages": len(codes), "lines": n_lines, "encode_batch_s": round(b, 3),
               "compression_table_s": round(o, 3), "ratio": round(o / b, 3), "cache_memory_s": round(t_mem, 4),
               "cache_disk_s": round(t_disk, 4)}  # fmt: skip
    met = o / b <= 1.3 and t_disk <= 0.5
    if not args.skip_memory:
        cmd = [sys.executable, __file__, "--memory-child"] + (
            ["--langs", str(args.langs)] if args.langs else []
        )
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ})
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"[3] 8 tokenizers x {len(codes)} languages ({res['rows']} rows, {res['seconds']:.1f} s): peak RSS "
              f"{res['peak_rss_mb']:.0f} MB (interpreter+imports {res['rss_start_mb']:.0f} MB) "
              f"(target < 2048 MB)")  # fmt: skip
        figures["peak_rss_8_tokenizers_mb"] = round(res["peak_rss_mb"])
        met = met and res["peak_rss_mb"] < 2048
    run.write(figures, targets={"ratio": "<= 1.3", "cache_disk_s": "<= 0.5", "peak_rss_8_tokenizers_mb": "< 2048"},
              met=met)  # fmt: skip
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    finally:
        if (
            "--memory-child" not in sys.argv
            and "--cache-child" not in sys.argv
            and "TOKLAB_CACHE" in os.environ
        ):
            if Path(os.environ["TOKLAB_CACHE"]).name.startswith("toklab-bench-"):
                shutil.rmtree(os.environ["TOKLAB_CACHE"], ignore_errors=True)
