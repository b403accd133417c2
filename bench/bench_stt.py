"""Benchmark: STT and vocabulary structure on Llama-3.1 (128k tokens), each against a baseline in the same run.

* STT (`stt_result`: reachability mask + tokenizations of the rest, cold caches) vs a bare loop of `model.tokenize` over the vocabulary on a model
  that already has ignore_merges off (the irreducible work of the test). Target <= 1.5x.
* `vocabulary_structure` on all 128k tokens, cold (memory and disk caches off; STT included, and with STT
  already cached). Target <= 3 s. Baseline: the reference method, a step-wise replay of every vocabulary
  string (its splits must be the same). Also the disk-cached load time.

Usage: python bench/bench_stt.py [TOKENIZER_DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402

from analysis import bpe, load  # noqa: E402
from analysis.bpe import structure, stt  # noqa: E402
from analysis.core.cache import clear_memory  # noqa: E402

ASSETS = Path(os.environ.get("TOKLAB_ASSETS", ROOT.parent / "shared" / "assets"))


def _clear() -> None:
    """Forget every in-memory result (STT, replays, merge arrays, structures)."""
    clear_memory()


def _clear_structure() -> None:
    """Forget the structure and merge arrays but keep the STT result."""
    for fn in (structure._structure, bpe.pair_ranks, bpe.merge_arrays):
        fn.cache_clear()


def main() -> int:
    """Run the benchmark and print timings, ratios and targets."""
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer", nargs="?", default=str(ASSETS / "tokenizers" / "llama-3.1"))
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs; the best of each is reported")
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))

    t0 = time.perf_counter()
    tok = load(args.tokenizer)
    vocab = tok.vocab
    _ = tok.merges, tok.id_to_token, tok.added_tokens
    print(
        f"{tok.name}: {len(vocab)} model tokens, {len(tok.merges)} merges, ignore_merges={tok.ignore_merges}"
    )
    print(f"load + parse vocab/merges: {time.perf_counter() - t0:.2f} s (not counted below)")

    # baseline model: the same BPE with ignore_merges off, prepared outside the timing
    base_model = stt._private_model(tok)
    own_model = tok.tokenizer.model
    words = list(vocab)

    base_t, own_t, stt_t, base_cpu, stt_cpu = [], [], [], [], []
    result = None
    for _ in range(args.repeat):
        base_model._clear_cache()  # both sides start with an empty Rust word cache
        t, c = time.perf_counter(), time.process_time()
        for w in words:
            base_model.tokenize(w)
        base_t.append(time.perf_counter() - t)
        base_cpu.append(time.process_time() - c)

        _clear()
        own_model._clear_cache()
        t, c = time.perf_counter(), time.process_time()
        result = stt.stt_result(tok)
        stt_t.append(time.perf_counter() - t)
        stt_cpu.append(time.process_time() - c)

        t = time.perf_counter()
        for w in words:
            own_model.tokenize(w)
        own_t.append(time.perf_counter() - t)
        own_model._clear_cache()
    assert result is not None
    unreachable = len(stt.unreachable_ids(tok))
    base, stt_s, own = min(base_t), min(stt_t), min(own_t)
    print(
        f"baseline  bare model.tokenize loop (ignore_merges off): {base:.2f} s wall, {min(base_cpu):.2f} s CPU"
    )
    print(f"(info)    loop on the tokenizer's own model (ignore_merges={tok.ignore_merges}): {own:.2f} s")
    print(
        f"STT       stt_result, cold caches: {stt_s:.2f} s wall, {min(stt_cpu):.2f} s CPU -> {unreachable} unreachable"
    )
    print(f"STT ratio {stt_s / base:.2f}x wall, {min(stt_cpu) / min(base_cpu):.2f}x CPU (target <= 1.5x)")

    # vocabulary structure
    vs_cold, vs_given, cpu_cold, cpu_given = [], [], [], []
    for _ in range(args.repeat):
        _clear()
        own_model._clear_cache()
        t, c = time.perf_counter(), time.process_time()
        vs = bpe.vocabulary_structure(tok, disk_cache=False)
        vs_cold.append(time.perf_counter() - t)
        cpu_cold.append(time.process_time() - c)
        _clear_structure()
        t, c = time.perf_counter(), time.process_time()
        vs = bpe.vocabulary_structure(tok, disk_cache=False)
        vs_given.append(time.perf_counter() - t)
        cpu_given.append(time.process_time() - c)
    print(
        f"vocabulary_structure: {len(vs.split)} produced, {len(vs.atomic)} atomic, {len(vs.leaves)} leaves, "
        f"{len(vs.unreachable)} unreachable, {len(vs.dead_merges)} dead merges, max depth {max(vs.depth.values())}"
    )
    print(
        f"vocabulary_structure cold (incl. STT): {min(vs_cold):.2f} s wall, {min(cpu_cold):.2f} s CPU (target <= 3 s)"
    )
    print(f"vocabulary_structure with STT cached:  {min(vs_given):.2f} s wall, {min(cpu_given):.2f} s CPU")
    # baseline: the reference method (methods.md §5) - replay every vocabulary string step by step and keep
    # the first merge that produces each token; must give the same splits
    t = time.perf_counter()
    rep = bpe.BPEReplay(tok, ignore_merges=False)
    ref: dict[int, tuple[int, int]] = {}
    for s in vocab:
        for a, b, r, _rank, _pos in rep._run(s)[2]:
            ref.setdefault(r, (a, b))
    naive = time.perf_counter() - t
    same = "same splits" if ref == vs.split else "SPLITS DIFFER"
    print(
        f"baseline  step-wise replay of every vocabulary string: {naive:.2f} s ({same}) -> "
        f"structure cold / replay {min(vs_cold) / naive:.2f}x"
    )
    structure._structure.cache_clear()
    bpe.vocabulary_structure(tok)  # writes the disk cache
    structure._structure.cache_clear()
    t = time.perf_counter()
    bpe.vocabulary_structure(tok)
    from_disk = time.perf_counter() - t
    print(f"vocabulary_structure from the disk cache: {from_disk:.2f} s")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss:.0f} MiB; load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    run.write({"tokenizer": tok.name, "unreachable": unreachable, "stt_s": round(stt_s, 3),
               "bare_tokenize_loop_s": round(base, 3), "stt_ratio": round(stt_s / base, 3),
               "structure_cold_s": round(min(vs_cold), 3), "structure_stt_cached_s": round(min(vs_given), 3),
               "replay_baseline_s": round(naive, 3), "same_splits": ref == vs.split,
               "structure_from_disk_s": round(from_disk, 3), "peak_rss_mib": round(rss)},
              targets={"stt_ratio": "<= 1.5", "structure_cold_s": "<= 3"},
              met=stt_s / base <= 1.5 and min(vs_cold) <= 3 and ref == vs.split)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
