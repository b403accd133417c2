"""`python -m analysis compress --tokenizer T [--tokenizer T2 …] --langs all|CODE,CODE [--flores DIR] --json`.

Compression metrics per tokenizer × FLORES language (see :mod:`analysis.measure.metrics`), or with ``--corpus PATH …``
per tokenizer × group of your own corpus (files, folders, quoted globs, ``hf://`` paths; ``--group-by
file|folder|input|all``), counted as the `compression` statistic of :mod:`analysis.jobs` in this process
or on the chosen executor. Both print :meth:`analysis.measure.grid.CompressionResult.to_json` (the rows) with
``--json``; `--csv FILE` writes the same rows as CSV. FLORES results are cached by tokenizer content hash +
data hash + metric parameters.
"""

from __future__ import annotations

import argparse
import sys

from analysis.core.inputs import real_number
from analysis.core.outputs import atomic_write_text
from analysis.errors import DataError
from analysis.jobs.stats import GROUP_BY
from analysis.measure.grid import CompressionResult, compression_table, corpus_rows
from analysis.measure.renyi import DEFAULT_POWER
from analysis.measure.summaries import compare
from analysis.texts.flores import DEFAULT_SPLIT, open_flores
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import LoadedTokenizer

from ._common import add_corpus_arguments, compute_from_args, flores_langs, print_json

NAME = "compress"
HELP = "compression metrics (bytes/token, fertility, parity, Rényi…) per tokenizer × FLORES language or corpus file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `compress`."""
    p.add_argument(
        "--tokenizer", "-t", action="append", required=True, metavar="T",
        help="folder, tokenizer.json, .gguf file or hub id (repeat for several, at most 8 recommended)",
    )  # fmt: skip
    p.add_argument("--revision", default=None, help="hub revision (branch, tag or commit)")
    p.add_argument("--token", default=None, help="hub access token (gated or private repos)")
    p.add_argument(
        "--langs", default="all", help="'all' or comma-separated codes (aliases like ekk_Latn accepted)"
    )
    p.add_argument(
        "--flores", default=None, help="FLORES folder, .tar.gz or parquet (default: $TOKLAB_FLORES or shared)"
    )
    p.add_argument("--split", default=DEFAULT_SPLIT, help="split name (default devtest)")
    p.add_argument(
        "--power",
        type=real_number(0, open_low=True),
        default=DEFAULT_POWER,
        help="Rényi power α (default 2.5)",
    )
    p.add_argument(
        "--reference",
        default=None,
        help="parity reference: a FLORES language (default eng_Latn) or, with --corpus, a group name",
    )
    p.add_argument("--json", action="store_true", help="print the rows as one JSON list")
    p.add_argument("--csv", metavar="FILE", default=None, help="also write the rows as CSV")
    p.add_argument("--no-cache", action="store_true", help="recompute even when cached")
    add_corpus_arguments(
        p,
        "--corpus",
        help="measure your own corpus instead of FLORES: a file, folder, quoted glob or hf://datasets/… path; "
        "repeatable",
    )
    p.add_argument(
        "--group-by",
        choices=GROUP_BY,
        default="file",
        help="--corpus: one row per file (name without suffixes), parent folder, --corpus value, or all",
    )


def _tokenizers(args: argparse.Namespace) -> list[LoadedTokenizer]:
    toks: list[LoadedTokenizer] = []
    for src in args.tokenizer:
        t = load(src, revision=args.revision, token=args.token)
        if any(o.name == t.name for o in toks):
            t = t.with_source(name=f"{t.name} ({len(toks) + 1})")
        toks.append(t)
    return toks


def corpus_result(toks: list[LoadedTokenizer], args: argparse.Namespace) -> CompressionResult:
    """Rows per tokenizer × corpus group, each tokenizer's corpus counted on the chosen executor."""
    rows, runs = [], []
    options = {"group_by": args.group_by, "power": args.power}
    for t in toks:
        run = compute_from_args(t, "compression", args, options=options, label=f"compress: {t.name}")
        if args.reference and args.reference not in run.result:
            raise DataError(
                f"the parity reference {args.reference!r} is not a group of the corpus "
                f"(groups: {', '.join(list(run.result)[:12])}{' …' if len(run.result) > 12 else ''})"
            )
        reference = args.reference or ("eng_Latn" if "eng_Latn" in run.result else None)
        rows += corpus_rows(t, run.result, label=t.name, reference=reference)
        runs.append({"tokenizer": t.name, **run.summary()})
    source = {"inputs": list(args.inputs), "group_by": args.group_by, "runs": runs}
    return CompressionResult("corpus", rows, args.power, args.reference, source)


def flores_result(toks: list[LoadedTokenizer], args: argparse.Namespace) -> CompressionResult:
    """Rows per tokenizer × FLORES language (cached cells)."""
    data = open_flores(args.flores, split=args.split)
    codes = flores_langs(args.langs, data=data)
    reference = args.reference or "eng_Latn"
    rows = compression_table(
        toks, data, codes, power=args.power, reference=reference, use_cache=not args.no_cache
    )
    source = {"flores": str(data.root), "split": data.split}
    return CompressionResult("flores", rows, args.power, reference, source)


def run(args: argparse.Namespace) -> int:
    """Compute the table and print it (JSON or text), optionally writing CSV."""
    toks = _tokenizers(args)
    result = corpus_result(toks, args) if args.inputs else flores_result(toks, args)
    if args.csv:
        atomic_write_text(args.csv, result.to_csv())
    if args.json:
        print_json(result.to_json())
        return 0
    _print_text(result, [t.name for t in toks])
    return 0


def _fmt(v: object) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _print_text(result: CompressionResult, names: list[str]) -> None:
    cols = ["tokenizer", result.key, "bytes_per_token", "chars_per_token", "fertility",
            "parity" if result.kind == "flores" else "parity_corpus", "renyi_efficiency", "tokens"]  # fmt: skip
    out = sys.stdout
    out.write("  ".join(f"{c:>16}" for c in cols) + "\n")
    for r in result.to_json():
        out.write("  ".join(f"{_fmt(r[c]):>16}" for c in cols) + "\n")
    out.write("\n")
    what = "languages" if result.kind == "flores" else "groups"
    for s in result.summary():
        out.write(
            f"{s['tokenizer']}: mean bytes/token {_fmt(s['mean'])} over {s['languages']} {what}, Gini {_fmt(s['gini'])}\n"
        )
    encoders = {r["tokenizer"]: (r.get("encoder"), r.get("encoder_reason")) for r in result.rows}
    for name, (enc, why) in encoders.items():
        out.write(f"{name}: encoded with {enc} ({why})\n")
    for b in names[1:]:
        c = compare(result.rows, names[0], b)
        if c["languages"]:
            out.write(
                f"{names[0]} vs {b}: Δrel bytes/token {c['delta_rel']:+.1%}, win rate {c['win_rate']:.1%}"
                f" ({c['languages']} {what})\n"
            )
