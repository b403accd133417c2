"""Benchmark: the step-wise BPE replay vs `tokenizers` on FLORES-200 devtest (all 204 languages by default).

For every BPE tokenizer in the shared assets: agreement rate (lines whose replayed tokens equal
`encode_batch(...).tokens` exactly) and throughput of the replay vs `encode_batch` in the same run.

Usage: python bench/bench_replay.py [--tokenizers gpt2,llama-2] [--langs N] [--lines N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402

from analysis import load  # noqa: E402
from analysis.bpe import BPEReplay  # noqa: E402

ASSETS = Path(os.environ.get("TOKLAB_ASSETS", ROOT.parent / "shared" / "assets"))


def main() -> int:
    """Run the benchmark; exit status 1 if any line disagrees."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizers", default="", help="comma-separated names (default: every BPE tokenizer)")
    ap.add_argument("--langs", type=int, default=0, help="first N languages only (default: all)")
    ap.add_argument("--lines", type=int, default=0, help="first N lines per language (default: all 1012)")
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))

    flores = sorted((ASSETS / "flores200" / "devtest").glob("*.devtest"))
    if args.langs:
        flores = flores[: args.langs]
    corpus: list[str] = []
    for f in flores:
        lines = f.read_text(encoding="utf-8").splitlines()
        corpus.extend(lines[: args.lines] if args.lines else lines)
    names = [n for n in args.tokenizers.split(",") if n] or sorted(
        p.name for p in (ASSETS / "tokenizers").iterdir() if p.is_dir()
    )
    print(
        f"FLORES-200 devtest: {len(flores)} languages, {len(corpus):,} lines, {sum(map(len, corpus)):,} chars"
    )
    total_bad = 0
    rows = []
    for name in names:
        tok = load(ASSETS / "tokenizers" / name)
        if tok.model_type != "BPE":
            print(f"{name:>24}: skipped ({tok.model_type})")
            continue
        rust = tok.tokenizer
        t = time.perf_counter()
        encs = rust.encode_batch(corpus, add_special_tokens=False)
        ref = [e.tokens for e in encs]
        t_rust = time.perf_counter() - t
        t = time.perf_counter()
        rep = BPEReplay(tok)
        t_build = time.perf_counter() - t
        t = time.perf_counter()
        bad = 0
        first_bad = None
        n_tokens = 0
        for line, want in zip(corpus, ref):
            got = rep.tokenize(line)
            n_tokens += len(want)
            if got != want:
                bad += 1
                if first_bad is None:
                    first_bad = line[:60]
        t_rep = time.perf_counter() - t
        total_bad += bad
        agree = 1 - bad / len(corpus)
        rows.append((name, agree, t_rust, t_rep))
        print(
            f"{name:>24}: agreement {agree:.4%} ({len(corpus) - bad:,}/{len(corpus):,} lines, {n_tokens:,} tokens); "
            f"encode_batch {t_rust:.1f} s ({n_tokens / t_rust:,.0f} tok/s), replay {t_rep:.1f} s "
            f"({n_tokens / t_rep:,.0f} tok/s, build {t_build:.1f} s) -> replay/encode_batch {t_rep / t_rust:.1f}x"
            + (f"; first mismatch: {first_bad!r}" if first_bad else "")
        )
    if rows:
        overall = sum(r[1] for r in rows) / len(rows)
        print(f"overall agreement {overall:.4%} over {len(rows)} BPE tokenizers (target 100%)")
        print(
            "replay time / encode_batch time (same run, same lines): "
            + ", ".join(f"{n} {tr / te:.1f}x" for n, _a, te, tr in rows)
        )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    run.write({"languages": len(flores), "lines": len(corpus),
               "tokenizers": [{"tokenizer": n, "agreement": round(a, 6), "encode_batch_s": round(te, 2),
                               "replay_s": round(tr, 2), "replay_vs_encode_batch": round(tr / te, 2)}
                              for n, a, te, tr in rows]},
              targets={"agreement": "== 1.0 for every tokenizer"}, met=not total_bad)  # fmt: skip
    return 1 if total_bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
