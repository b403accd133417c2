"""`python -m analysis dynamic TOKENIZER --text "..." [--file F] [--merges N] [--boundary B] [--json]`.

Batch-level dynamic tokenization (see :mod:`analysis.methods.dynamic`): every `--text` and every non-empty line of
`--file` (and `--flores LANG` lines) is one example of the batch; prints the lengths before/after and the
merges performed in order. `--special-tokens` counts the post-processor's special tokens in the lengths;
`--batch-size B` splits the examples into batches and `--sample-merges` draws each batch's merge count from
U(0, m_max) as Feher et al. train; `--model M` computes the FVT embeddings of the batch's merged tokens for that
model and reports their cost next to the sequence-length saving (`--embeddings-out DIR` writes them);
`--full-curve` adds the curve until no valid pair is left, as the page draws it. The JSON is
:class:`analysis.methods.dynamic.DynamicReport` (or :class:`analysis.methods.dynamic.SampledBatches` with `--batch-size`), the
document the Dynamic tokenization page offers for download.
"""

from __future__ import annotations

import argparse

from analysis.core.inputs import real_number, whole_number
from analysis.core.outputs import check_output_folder
from analysis.errors import DataError
from analysis.methods.dynamic import (
    BOUNDARIES,
    FULL_CURVE_MERGES,
    MAX_BATCH_CHARS,
    DynamicReport,
    batch_fvt_embeddings,
    check_batch_size,
    dynamic_tokenize,
    sampled_batches,
)
from analysis.methods.dynamic.defaults import DEFAULT_BOUNDARY, DEFAULT_MERGES, DEFAULT_N, DEFAULT_SEED
from analysis.texts import flores
from analysis.texts.corpora import iter_file, with_budget

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
    p.add_argument(
        "--n", type=whole_number(1), default=DEFAULT_N, help=f"how many FLORES lines (default {DEFAULT_N})"
    )
    p.add_argument(
        "--merges",
        type=whole_number(0),
        default=DEFAULT_MERGES,
        help=f"maximum number of merges (default {DEFAULT_MERGES})",
    )
    p.add_argument(
        "--boundary",
        choices=BOUNDARIES,
        default=DEFAULT_BOUNDARY,
        help=f"merge boundary (default {DEFAULT_BOUNDARY})",
    )
    p.add_argument(
        "--target",
        type=real_number(0, 100, open_low=True),
        default=None,
        help="also report the merges needed for this reduction %%",
    )
    p.add_argument(
        "--full-curve",
        action="store_true",
        help=f"also merge until no valid pair is left (at most {FULL_CURVE_MERGES}) and report that curve",
    )
    p.add_argument(
        "--special-tokens",
        action="store_true",
        help="count the special tokens the tokenizer adds (BOS/EOS …) in the sequence lengths (they never merge)",
    )
    p.add_argument(
        "--batch-size",
        type=whole_number(1),
        default=None,
        help="split the examples into batches of this size",
    )
    p.add_argument(
        "--sample-merges",
        action="store_true",
        help="with --batch-size: draw each batch's merge count from U(0, m_max) instead of --merges",
    )
    p.add_argument(
        "--seed",
        type=whole_number(0),
        default=DEFAULT_SEED,
        help=f"seed of --sample-merges (default {DEFAULT_SEED})",
    )
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
    runs = sampled_batches(tok, texts, batch_size=args.batch_size, merges=None if args.sample_merges else args.merges,
                           seed=args.seed, boundary=args.boundary, special_tokens=args.special_tokens)  # fmt: skip
    if args.json:
        print_json(runs.to_json())
        return 0
    how = f"m ~ U(0, m_max), seed {args.seed}" if args.sample_merges else f"m = min({args.merges}, m_max)"
    print(f"tokenizer {tok.name} · boundary {args.boundary} · {len(runs.runs)} batches · {how}")
    print(
        f"{'batch':>5} {'seqs':>5} {'m_max':>6} {'m':>6} {'before':>7} {'after':>7} {'reduction':>9} {'of max':>7}"
    )
    for r in runs.runs:
        print(f"{r.index:>5} {r.sequences:>5} {r.m_max:>6} {r.merges:>6} {r.tokens_before:>7} {r.tokens_after:>7} "
              f"{r.reduction_pct:>8.1f}% {r.reduction_of_max_pct:>6.1f}%")  # fmt: skip
    return 0


def _embeddings(args: argparse.Namespace, tok, res) -> dict:
    emb = batch_fvt_embeddings(res, tok, args.model)
    rep = emb.report()
    if args.embeddings_out:
        rep["out"] = emb.save(args.embeddings_out, replace=args.force)
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
        if args.model or args.full_curve:
            raise DataError("--model and --full-curve work on one batch: leave out --batch-size")
        return _batches(args, tok, texts)
    res = dynamic_tokenize(tok, texts, args.merges, args.boundary, special_tokens=args.special_tokens)
    full = None
    if args.full_curve:
        full = dynamic_tokenize(
            tok, texts, FULL_CURVE_MERGES, args.boundary, special_tokens=args.special_tokens
        )
    report = DynamicReport(res, args.target, full, _embeddings(args, tok, res) if args.model else None)
    if args.json:
        print_json(report.to_json())
        return 0
    _print(report, args)
    return 0


def _print(report: DynamicReport, args: argparse.Namespace) -> None:
    res, d = report.result, report.to_json()
    print(f"tokenizer {res.tokenizer} · boundary {res.boundary} · {len(res.tokens)} sequences")
    print(
        f"tokens before {d['total_before']} → after {d['total_after']} ({res.reduction_pct:.2f}% shorter) with "
        f"{len(res.merges)} merges"
    )
    print(f"average length {res.merges2seqlen[0]:.2f} → {res.merges2seqlen[-1]:.2f}")
    if res.exhausted:
        print("stopped early: no valid pair left (boundary level reached)")
    if args.target is not None:
        target = d["merges_for_target"]
        print(f"merges for {args.target:g}% reduction: {target if target is not None else 'not reached'}")
    if report.full is not None:
        f = d["full_curve"]
        more = "" if f["exhausted"] else "+"
        line = f"full curve: {len(report.full.merges)}{more} merges to the boundary level"
        if args.target is not None:
            need = f["merges_for_target"]
            line += f"; {args.target:g}% needs {need if need is not None else 'more than possible'}"
        print(line)
    for k, m in enumerate(res.merges, 1):
        print(f"{k:>5}  {m.left!r} + {m.right!r} → {m.merged!r}  (count {m.count}, replaced {m.replaced})")
    emb = report.embeddings
    if emb is not None:
        print(
            f"embeddings for {emb['model']}: {emb['tokens_saved']} tokens saved ({emb['reduction_pct']:.1f}%, attention "
            f"cost −{emb['attention_cost_reduction_pct']:.1f}%) for {emb['rows_computed']} FVT rows "
            f"({emb['new_rows_bytes'] / 1024:.1f} KiB, {emb['fvt_seconds'] * 1e3:.1f} ms; reading the matrix "
            f"{emb['read_seconds']:.1f} s); the batch uses {emb['unique_tokens']} rows of dim {emb['dim']}"
        )
        if emb.get("out"):
            print(f"written to {emb['out']}")
