"""Benchmark: gigatoken's BPE trainer (`gigatoken.train_bpe`) against the project's two plain-BPE baselines.

The corpus of `parity-train`'s plain baseline: FLORES-200 devtest lines 1–700 of every language. Three trainers,
each to the same vocabulary size, on GPT-2's byte-level pre-tokenization:

* ``tokenizers``: `analysis.bpe.parity.train_plain_bpe` (the `tokenizers` BpeTrainer; parity-train's baseline);
* ``project``: `analysis.bpe.trainer.learn` over the same pre-token counts (the one from-scratch trainer that
  continued training, regen and SA-BPE use; pre-tokenizing is timed with it);
* ``gigatoken``: `gigatoken.train_bpe(text, vocab_size, [], tie_breaking="huggingface", separator=b"\\n")`;
* ``train_plain_bpe``: what parity-train runs now (gigatoken's merges in the BpeTrainer's tokenizer), checked to
  be the BpeTrainer's tokenizer exactly (its JSON).

Reports each trainer's seconds and how many of the merges equal the others' (same merges in the same order), so
gigatoken's trainer is adopted only where its merges are identical and it is faster.
Usage: `python bench/bench_bpe_train.py [--vocab 8000] [--lines 700]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _results import Run, variant_from  # noqa: E402
from tokenizers import pre_tokenizers  # noqa: E402

from analysis.bpe.parity import train_plain_bpe  # noqa: E402
from analysis.bpe.trainer import learn  # noqa: E402
from analysis.measure import fast_encode as fe  # noqa: E402
from analysis.texts.flores import open_flores  # noqa: E402
from analysis.tokenizer.alphabets import BYTE_TO_CHAR  # noqa: E402


def same_prefix(a: list, b: list) -> int:
    """How many leading merges two merge lists share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    """Train three ways, compare the merges, print and write the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--lines", type=int, default=700)
    args = ap.parse_args()
    run = Run(__file__, variant=variant_from(ap, args))
    data = open_flores()
    lines = [s for c in data.codes for s in data.lines(c)[: args.lines]]
    mb = sum(len(s.encode("utf-8")) for s in lines) / 1e6
    print(f"{len(lines):,} lines, {mb:.1f} MB, vocabulary {args.vocab}")
    out: dict[str, dict] = {}

    os.environ[fe.ENV_SWITCH] = "tokenizers"  # the BpeTrainer itself
    t0 = time.perf_counter()
    tk = train_plain_bpe(lines, args.vocab)
    t_tk = time.perf_counter() - t0
    del os.environ[fe.ENV_SWITCH]
    m_tk = [
        tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
        for m in json.loads(tk.to_str())["model"]["merges"]
    ]
    out["tokenizers"] = {"seconds": round(t_tk, 2), "merges": len(m_tk)}

    t0 = time.perf_counter()
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False)
    counts: Counter = Counter()
    for s in lines:
        counts.update(w for w, _ in pre.pre_tokenize_str(s))
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    known = set(alphabet)
    trained = learn(
        ((tuple(w), c) for w, c in counts.items()),
        args.vocab - len(alphabet),
        known=known.__contains__,
        alphabet=alphabet,
    )
    m_pr = [(p.left, p.right) for p in trained.pops if p.skipped is None]
    t_pr = time.perf_counter() - t0
    out["project"] = {"seconds": round(t_pr, 2), "merges": len(m_pr)}

    mod, why = fe.fast_module()
    if mod is not None:
        text = "\n".join(lines).encode("utf-8")
        t0 = time.perf_counter()
        _, merges = mod.train_bpe(text, args.vocab, [], tie_breaking="huggingface", separator=b"\n")
        t_gt = time.perf_counter() - t0
        m_gt = [("".join(BYTE_TO_CHAR[b] for b in x), "".join(BYTE_TO_CHAR[b] for b in y)) for x, y in merges]
        out["gigatoken"] = {"seconds": round(t_gt, 2), "merges": len(m_gt)}
        t0 = time.perf_counter()
        adopted = train_plain_bpe(lines, args.vocab)  # what parity-train runs now
        out["train_plain_bpe"] = {
            "seconds": round(time.perf_counter() - t0, 2),
            "same_tokenizer_as_bpe_trainer": adopted.to_str() == tk.to_str(),
        }
    else:
        m_gt = []
        out["gigatoken"] = {"error": why}
    pairs = {"tokenizers_vs_project": (m_tk, m_pr), "gigatoken_vs_tokenizers": (m_gt, m_tk),
             "gigatoken_vs_project": (m_gt, m_pr)}  # fmt: skip
    same = {}
    for name, (a, b) in pairs.items():
        n = min(len(a), len(b))
        same[name] = {
            "identical": a == b,
            "same_leading_merges": same_prefix(a, b),
            "of": n,
            "same_merge_set_share": round(len(set(a[:n]) & set(b[:n])) / n, 4) if n else None,
        }
    for k, v in out.items():
        print(f"{k:10}: {v}")
    for k, v in same.items():
        print(f"{k:24}: {v}")
    adopted = out.get("train_plain_bpe", {}).get("same_tokenizer_as_bpe_trainer", False)
    faster = "seconds" in out["gigatoken"] and out["gigatoken"]["seconds"] < out["tokenizers"]["seconds"]
    run.write(
        {
            "versions": fe.versions(),
            "corpus": {"lines": len(lines), "mb": round(mb, 2), "flores_lines_per_language": args.lines},
            "vocab_size": args.vocab,
            "trainers": out,
            "merges_compared": same,
        },
        targets={"gigatoken_vs_tokenizers": "identical merges, faster (then train_plain_bpe adopts it)"},
        met=bool(same["gigatoken_vs_tokenizers"]["identical"] and faster and adopted),
    )


if __name__ == "__main__":
    main()
