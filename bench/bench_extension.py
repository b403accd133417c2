"""Benchmark: continued BPE training vs the `tokenizers` BpeTrainer from scratch, peak memory, preview updates.

One run prints:
* continued training of 8,000 merges on Llama-3.1 over >= 10 MB of text (Estonian + Finnish prose, UI strings
  and word lists, topped up with Python code from the shared corpora), word collection included;
* the `tokenizers` BpeTrainer training 8,000 merges from scratch on the same text with the same normalizer /
  pre-tokenizer / byte alphabet (its word counting runs in Rust, on every core);
* the ratio (target <= 3x), the peak RSS of each (each job runs in its own child process);
* the time the Extend page's preview needs to update after N changes (target <= 2 s per method).

Usage: `python bench/bench_extension.py [--tokenizer DIR] [--n 8000] [--mb 10.5]`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis import load  # noqa: E402
from analysis.bpe.training import continue_training  # noqa: E402
from analysis.core.paths import shared_assets as assets_dir  # noqa: E402
from analysis.methods.extension import Preview, plan, train_auxiliary  # noqa: E402
from analysis.texts.corpora import Corpus, Source, corpus  # noqa: E402
from analysis.texts.flores import lines as flores_lines  # noqa: E402
from analysis.texts.flores import split_lines as flores_split  # noqa: E402


def bench_corpus(mb: float) -> Corpus:
    """>= mb MB of text: FLORES est training lines, the Estonian and Finnish corpora, then Python code."""
    c = assets_dir() / "corpora"
    srcs = [Source("flores-train", "est_Latn:800")]
    for name in (
        "est_Latn.txt.gz",
        "est_Latn.ui.txt.gz",
        "est_Latn.hunspell-words.txt.gz",
        "fin_Latn.txt.gz",
        "fin_Latn.ui.txt.gz",
    ):
        srcs.append(Source("file", str(c / "text" / name)))
    srcs.append(Source("file", str(c / "code" / "python.jsonl.gz")))
    return corpus(*srcs, max_chars=int(mb * 1_000_000))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def job(kind: str, tok_dir: str, n: int, mb: float) -> dict:
    """One measured job (runs in a child process)."""
    tok = load(tok_dir)
    text = list(bench_corpus(mb))
    nbytes = sum(len(u.encode("utf-8")) for u in text)
    rss0 = _rss_mb()
    t0 = time.perf_counter()
    if kind == "continued":
        res = continue_training(tok, text, n)
        info = {"new_tokens": res.n_new, "word_types": res.word_types, "phases": res.seconds}
    else:
        aux = train_auxiliary(tok, text, 256 + n)
        info = {"vocab": len(aux.tokens), "merges": len(aux.merges)}
    sec = time.perf_counter() - t0
    return {
        "kind": kind,
        "seconds": sec,
        "bytes": nbytes,
        "chars": sum(map(len, text)),
        "units": len(text),
        "rss_before_mb": rss0,
        "peak_rss_mb": _rss_mb(),
        **info,
    }


def run_child(kind: str, args: argparse.Namespace) -> dict:
    """Run one job in a fresh Python process (clean peak-RSS measurement) and return its JSON."""
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--job",
            kind,
            "--tokenizer",
            args.tokenizer,
            "--n",
            str(args.n),
            "--mb",
            str(args.mb),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def preview_bench(tok_dir: str, n_max: int) -> list[tuple[str, int, float]]:
    """Seconds per preview update (continued and regen) after N changes, plans trained once beforehand."""
    tok = load(tok_dir)
    est = Source("file", str(assets_dir() / "corpora" / "text" / "est_Latn.txt.gz"))
    text = list(corpus(Source("flores-train", "est_Latn:800"), est))
    _, held = flores_split("est_Latn")
    plans = {"continued": plan(tok, "continued", text, n_max)}
    plans["regen"] = plan(tok, "regen", text, n_max)
    pv = Preview(
        tok,
        plans,
        {"est_Latn held-out": held, "eng_Latn": flores_lines("eng_Latn")},
        target="est_Latn held-out",
        english="eng_Latn",
    )
    for m in plans:  # first view (builds the simulator, caches); not an N change
        pv.at(m, n_max)
    out = []
    for n in (n_max // 2, n_max // 4, n_max - 1, 1000):
        for m in plans:
            t0 = time.perf_counter()
            pv.at(m, n)
            out.append((m, n, time.perf_counter() - t0))
    return out


def main() -> int:
    """Run every measurement and print the numbers with their targets."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokenizer", default=str(assets_dir() / "tokenizers" / "llama-3.1"))
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--mb", type=float, default=10.5)
    ap.add_argument("--job", default=None)
    args = ap.parse_args()
    if args.job:
        print(json.dumps(job(args.job, args.tokenizer, args.n, args.mb)))
        return 0
    print(f"tokenizer {args.tokenizer}, {args.n} new tokens, {os.cpu_count()} CPU cores")
    cont = run_child("continued", args)
    scratch = run_child("bpetrainer", args)
    print(f"text: {cont['bytes'] / 1e6:.2f} MB ({cont['chars']:,} chars, {cont['units']:,} units)")
    print(
        f"continued training ({cont['new_tokens']} new tokens, {cont['word_types']:,} word types): "
        f"{cont['seconds']:.1f} s  phases {json.dumps({k: round(v, 1) for k, v in cont['phases'].items()})}"
    )
    print(f"tokenizers BpeTrainer from scratch ({scratch['merges']} merges): {scratch['seconds']:.1f} s")
    ratio = cont["seconds"] / scratch["seconds"]
    print(f"ratio continued / BpeTrainer: {ratio:.2f}x (target <= 3x) {'OK' if ratio <= 3 else 'MISSED'}")
    for r in (cont, scratch):
        print(
            f"peak RSS {r['kind']}: {r['peak_rss_mb']:.0f} MB (after loading tokenizer + text "
            f"{r['rss_before_mb']:.0f} MB, +{r['peak_rss_mb'] - r['rss_before_mb']:.0f} MB for training)"
        )
    times = preview_bench(args.tokenizer, min(args.n, 4000))
    for m, n, s in times:
        print(f"preview update {m:>9} N -> {n:>5}: {s:.2f} s")
    worst = max(s for _, _, s in times)
    print(
        f"preview update worst: {worst:.2f} s (target <= 2 s per method) {'OK' if worst <= 2 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
