"""Benchmark: SA-BPE training vs plain incremental BPE and the `tokenizers` BpeTrainer on the same code corpus.

One run, on a slice of the shared source-attributed code corpus (every language, N files per repository):
* word collection with per-repository / per-language counts (`sabpe.collect_words`, Rust pre-tokenizer);
* plain incremental BPE (`training.train_merges`: the trainer core with frequency statistics) on the same word
  counts — the baseline;
* the SA-BPE trainer with priority F (source counters kept, same merges), F*log(R)*L, and F*log(R)*L with
  skipping (R < 2);
* the `tokenizers` BpeTrainer from scratch on the same texts (same normalizer / pre-tokenizer / byte alphabet,
  its counting in Rust on every core), compared with our collect + train;
* CPU times (`time.process_time`, this process and its Rust threads: robust when other jobs share the cores);
* ratios against the baselines and the targets (SA-BPE training <= 4x plain, the per-repository and per-language counters cost about as much as the frequency updates (Chizhov, Bogomolov & Yamshchikov, ACL 2026, App. E); collect + train <= 10x BpeTrainer).

Usage: `python bench/bench_sabpe.py [--base DIR] [--vocab 4000] [--files 3]`.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # noqa: E402

from analysis import load  # noqa: E402
from analysis.bpe.training import train_merges  # noqa: E402
from analysis.core.paths import shared_assets as assets_dir  # noqa: E402
from analysis.methods import sabpe  # noqa: E402
from analysis.texts import code  # noqa: E402


def main() -> None:
    """Run the benchmark and print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default=str(assets_dir() / "tokenizers" / "gpt2"))
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--files", type=int, default=3, help="files per repository and language")
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))
    found = []
    base = load(args.base)
    recs = code.read_code(max_files_per_repo=args.files)
    texts = [r.text for r in recs]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    t0 = time.process_time()
    sw = sabpe.collect_words(base, recs)
    t_collect = time.process_time() - t0
    print(
        f"corpus: {len(recs):,} files, {len(sw.repos)} repositories, {len(sw.languages)} languages, {mb:.1f} MB, "
        f"{len(sw.words):,} word types; collect {t_collect:.2f} s"
    )
    n_new = args.vocab - 256 - 1
    alphabet = set(sabpe.ALPHABET)

    t0 = time.process_time()
    plain = train_merges(sw.counter(), n_new, lambda s: s in alphabet)
    t_plain = time.process_time() - t0
    print(f"plain incremental BPE (training.train_merges): {len(plain):,} merges in {t_plain:.2f} s")

    runs = [
        ("SA-BPE trainer, priority F", "F", sabpe.SkipRule()),
        ("SA-BPE F*log(R)*L", "F*log(R)*L", sabpe.SkipRule()),
        ("SA-BPE F*log(R)*L, skip R<2", "F*log(R)*L", sabpe.SkipRule(min_repos=2)),
    ]
    worst = 0.0
    for label, prio, skip in runs:
        t0 = time.process_time()
        st = sabpe.train_source_bpe(sw, n_new, priority=prio, skip=skip)
        dt = time.process_time() - t0
        worst = max(worst, dt / t_plain)
        found.append({"trainer": label, "cpu_s": round(dt, 3), "vs_plain": round(dt / t_plain, 3)})
        same = " (same merges as plain)" if prio == "F" and st.merges == [s.pair for s in plain] else ""
        skipped = sum(1 for h in st.history if h.skipped)
        print(
            f"{label}: {len(st.merges):,} merges, {skipped:,} skipped, {dt:.2f} s — {dt / t_plain:.2f}x plain{same}"
        )
    sa_total = t_collect + dt

    hf = Tokenizer(models.BPE())
    if base.tokenizer.normalizer is not None:
        hf.normalizer = base.tokenizer.normalizer
    hf.pre_tokenizer = base.tokenizer.pre_tokenizer
    trainer = trainers.BpeTrainer(
        vocab_size=args.vocab,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=list(sabpe.DEFAULT_SPECIALS),
        show_progress=False,
    )
    t0 = time.process_time()
    hf.train_from_iterator(texts, trainer=trainer)
    t_hf = time.process_time() - t0
    print(f"tokenizers BpeTrainer (counting + training, Rust, all cores): {t_hf:.2f} s CPU")
    print(f"ratio SA-BPE training / plain incremental: worst {worst:.2f}x (target <= 4x)")
    print(
        f"ratio SA-BPE collect + train (skip R<2) / BpeTrainer: {sa_total / t_hf:.2f}x "
        f"({sa_total:.2f} s vs {t_hf:.2f} s; target <= 10x)"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB")
    run.write({"files": len(recs), "repositories": len(sw.repos), "languages": len(sw.languages), "mb": round(mb, 2),
               "merges": n_new, "collect_cpu_s": round(t_collect, 3), "plain_cpu_s": round(t_plain, 3),
               "trainers": found, "worst_vs_plain": round(worst, 3), "bpetrainer_cpu_s": round(t_hf, 3),
               "collect_train_vs_bpetrainer": round(sa_total / t_hf, 3), "peak_rss_mb": round(peak)},
              targets={"worst_vs_plain": "<= 4", "collect_train_vs_bpetrainer": "<= 10"},
              met=worst <= 4 and sa_total / t_hf <= 10)  # fmt: skip


if __name__ == "__main__":
    main()
