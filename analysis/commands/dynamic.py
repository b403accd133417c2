"""`python -m analysis dynamic TOKENIZER --text "..." [--file F] [--merges N] [--boundary B] [--json]`.

Batch-level dynamic tokenization (see :mod:`analysis.dynamic`): every `--text` and every non-empty line of
`--file` (and `--flores LANG` lines) is one example of the batch; prints the lengths before/after and the
merges performed in order. `--special-tokens` counts the post-processor's special tokens in the lengths;
`--batch-size B` splits the examples into batches and `--sample-merges` draws each batch's merge count from
U(0, m_max) as Feher et al. train; `--model M` computes the FVT embeddings of the batch's merged tokens for that
model and reports their cost next to the sequence-length saving (`--embeddings-out DIR` writes them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from safetensors.numpy import save

from .. import flores
from ..corpora import iter_file, with_budget
from ..dynamic import (
    BOUNDARIES,
    MAX_BATCH_CHARS,
    batch_fvt_embeddings,
    check_batch_size,
    dynamic_batches,
    dynamic_tokenize,
)
from ..errors import DataError
from ..outputs import atomic_folder, atomic_write_text, check_output_folder, strict_json
from ._common import add_tokenizer_argument, load_from_args, print_json

NAME = "dynamic"
HELP = "dynamic tokenization of a batch: merge its most frequent adjacent token pairs (Feher et al.)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `dynamic`."""
    add_tokenizer_argument(p)
    p.add_argument("--text", action="append", default=[], help="one example of the batch (repeat for more)")
    p.add_argument(
        "--file", action="append", default=[], help="UTF-8 text file, one example per non-empty line"
    )
    p.add_argument("--flores", default=None, metavar="LANG", help="add FLORES-200 devtest lines of LANG")
    p.add_argument("--n", type=int, default=32, help="how many FLORES lines (default 32)")
    p.add_argument("--merges", type=int, default=100, help="maximum number of merges (default 100)")
    p.add_argument(
        "--boundary", choices=BOUNDARIES, default="pretokens", help="merge boundary (default pretokens)"
    )
    p.add_argument(
        "--target", type=float, default=None, help="also report the merges needed for this reduction %%"
    )
    p.add_argument(
        "--special-tokens",
        action="store_true",
        help="count the special tokens the tokenizer adds (BOS/EOS …) in the sequence lengths (they never merge)",
    )
    p.add_argument(
        "--batch-size", type=int, default=None, help="split the examples into batches of this size"
    )
    p.add_argument(
        "--sample-merges",
        action="store_true",
        help="with --batch-size: draw each batch's merge count from U(0, m_max) instead of --merges",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --sample-merges (default 0)")
    p.add_argument(
        "--model",
        default=None,
        help="FVT embeddings of the merged tokens for this model (folder, file, hub id)",
    )
    p.add_argument(
        "--embeddings-out",
        default=None,
        metavar="DIR",
        help="with --model: write embeddings.safetensors (one row per unique token) and tokens.json to a new folder",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a non-empty --embeddings-out folder (whole, never merged)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _texts(args: argparse.Namespace) -> list[str]:
    texts = list(args.text)
    for f in args.file:  # bounded line pieces, strict UTF-8; never more than the batch limit (+1) is read
        texts += list(with_budget(iter_file(f), MAX_BATCH_CHARS + 1))
        check_batch_size(texts)
    if args.flores:
        texts += flores.lines(args.flores)[: max(args.n, 0)]
    if not texts:
        raise DataError("give the batch with --text, --file or --flores")
    return texts


def _batches(args: argparse.Namespace, tok, texts: list[str]) -> int:
    runs = dynamic_batches(tok, texts, batch_size=args.batch_size, merges=None if args.sample_merges else args.merges,
                           seed=args.seed, boundary=args.boundary, special_tokens=args.special_tokens)  # fmt: skip
    if args.json:
        doc = {"tokenizer": tok.name, "boundary": args.boundary, "sampled": args.sample_merges, "seed": args.seed,
               "special_tokens": args.special_tokens, "batches": [r.to_json() for r in runs]}  # fmt: skip
        sys.stdout.write(strict_json(doc) + "\n")
        return 0
    how = f"m ~ U(0, m_max), seed {args.seed}" if args.sample_merges else f"m = min({args.merges}, m_max)"
    print(f"tokenizer {tok.name} · boundary {args.boundary} · {len(runs)} batches · {how}")
    print(
        f"{'batch':>5} {'seqs':>5} {'m_max':>6} {'m':>6} {'before':>7} {'after':>7} {'reduction':>9} {'of max':>7}"
    )
    for r in runs:
        print(f"{r.index:>5} {r.sequences:>5} {r.m_max:>6} {r.merges:>6} {r.tokens_before:>7} {r.tokens_after:>7} "
              f"{r.reduction_pct:>8.1f}% {r.reduction_of_max_pct:>6.1f}%")  # fmt: skip
    return 0


def _embeddings(args: argparse.Namespace, tok, res) -> dict:
    emb = batch_fvt_embeddings(res, tok, args.model)
    rep = {"model": args.model, **emb.report()}
    if args.embeddings_out:
        with atomic_folder(args.embeddings_out, replace=args.force) as tmp:
            (tmp / "embeddings.safetensors").write_bytes(save({"embeddings": emb.rows}))
            doc = {"tokens": emb.tokens, "merged": emb.merged, "pieces": emb.pieces, "report": rep}
            atomic_write_text(tmp / "tokens.json", json.dumps(doc, ensure_ascii=False))
        rep["out"] = str(Path(args.embeddings_out).resolve())
    return rep


def run(args: argparse.Namespace) -> int:
    """Tokenize the batch dynamically and print the outcome."""
    tok = load_from_args(args)
    texts = _texts(args)
    if args.sample_merges and not args.batch_size:
        raise DataError("--sample-merges draws one merge count per batch: give --batch-size")
    if args.embeddings_out and not args.model:
        raise DataError("--embeddings-out needs --model")
    if args.embeddings_out:
        check_output_folder(args.embeddings_out, replace=args.force)  # before the work, not after it
    if args.batch_size:
        if args.model:
            raise DataError("--model works on one batch: leave out --batch-size")
        return _batches(args, tok, texts)
    res = dynamic_tokenize(tok, texts, args.merges, args.boundary, special_tokens=args.special_tokens)
    target = None if args.target is None else res.merges_for_reduction(args.target)
    emb = _embeddings(args, tok, res) if args.model else None
    if args.json:
        d = res.to_json()
        if args.target is not None:
            d["target_reduction_pct"] = args.target
            d["merges_for_target"] = target
        if emb is not None:
            d["embeddings"] = emb
        print_json(d)
        return 0
    before, after = sum(res.lengths_before), sum(res.lengths_after)
    print(f"tokenizer {res.tokenizer} · boundary {res.boundary} · {len(res.tokens)} sequences")
    print(
        f"tokens before {before} → after {after} ({res.reduction_pct:.2f}% shorter) with {len(res.merges)} merges"
    )
    print(f"average length {res.merges2seqlen[0]:.2f} → {res.merges2seqlen[-1]:.2f}")
    if res.exhausted:
        print("stopped early: no valid pair left (boundary level reached)")
    if args.target is not None:
        print(f"merges for {args.target:g}% reduction: {target if target is not None else 'not reached'}")
    for k, m in enumerate(res.merges, 1):
        print(f"{k:>5}  {m.left!r} + {m.right!r} → {m.merged!r}  (count {m.count}, replaced {m.replaced})")
    if emb is not None:
        print(
            f"embeddings for {args.model}: {emb['tokens_saved']} tokens saved ({emb['reduction_pct']:.1f}%, attention "
            f"cost −{emb['attention_cost_reduction_pct']:.1f}%) for {emb['rows_computed']} FVT rows "
            f"({emb['new_rows_bytes'] / 1024:.1f} KiB, {emb['fvt_seconds'] * 1e3:.1f} ms; reading the matrix "
            f"{emb['read_seconds']:.1f} s); the batch uses {emb['unique_tokens']} rows of dim {emb['dim']}"
        )
        if emb.get("out"):
            print(f"written to {emb['out']}")
    return 0
