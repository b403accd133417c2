"""`python -m analysis compress --tokenizer T [--tokenizer T2 …] --langs all|CODE,CODE [--flores DIR] --json`.

Compression metrics per tokenizer × FLORES language (see :mod:`analysis.metrics`); `--csv FILE` writes the
same rows as CSV. Results are cached by tokenizer content hash + data hash + metric parameters.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys

from ..flores import DEFAULT_SPLIT, open_flores
from ..metrics import DEFAULT_POWER, ROW_COLUMNS, compare, compression_table, summarize
from ..outputs import atomic_write_text
from ..sources import load
from ._common import print_json

NAME = "compress"
HELP = "compression metrics (bytes/token, fertility, parity, Rényi…) per tokenizer × FLORES language"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `compress`."""
    p.add_argument(
        "--tokenizer", "-t", action="append", required=True, metavar="T",
        help="folder, tokenizer.json or hub id (repeat for several, at most 8 recommended)",
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
    p.add_argument("--power", type=float, default=DEFAULT_POWER, help="Rényi power α (default 2.5)")
    p.add_argument("--reference", default="eng_Latn", help="reference language for parity (default eng_Latn)")
    p.add_argument("--json", action="store_true", help="print the rows as one JSON list")
    p.add_argument("--csv", metavar="FILE", default=None, help="also write the rows as CSV")
    p.add_argument("--no-cache", action="store_true", help="recompute even when cached")


def run(args: argparse.Namespace) -> int:
    """Compute the table and print it (JSON or text), optionally writing CSV."""
    data = open_flores(args.flores, split=args.split)
    codes = data.resolve_many(args.langs)
    toks = []
    for src in args.tokenizer:
        t = load(src, revision=args.revision, token=args.token)
        if any(o.name == t.name for o in toks):
            t = t.with_source(name=f"{t.name} ({len(toks) + 1})")
        toks.append(t)
    rows = compression_table(
        toks, data, codes, power=args.power, reference=args.reference, use_cache=not args.no_cache
    )
    if args.csv:
        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=ROW_COLUMNS)
        w.writeheader()
        w.writerows(rows)
        atomic_write_text(args.csv, buf.getvalue())
    if args.json:
        print_json(rows)
        return 0
    _print_text(rows, [t.name for t in toks])
    return 0


def _fmt(v: object) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _print_text(rows: list[dict], names: list[str]) -> None:
    cols = [
        "tokenizer",
        "lang",
        "bytes_per_token",
        "chars_per_token",
        "fertility",
        "parity",
        "renyi_efficiency",
        "tokens",
    ]
    out = sys.stdout
    out.write("  ".join(f"{c:>16}" for c in cols) + "\n")
    for r in rows:
        out.write("  ".join(f"{_fmt(r[c]):>16}" for c in cols) + "\n")
    out.write("\n")
    for s in summarize(rows):
        out.write(
            f"{s['tokenizer']}: mean bytes/token {_fmt(s['mean'])} over {s['languages']} languages, Gini {_fmt(s['gini'])}\n"
        )
    for b in names[1:]:
        c = compare(rows, names[0], b)
        if c["languages"]:
            out.write(
                f"{names[0]} vs {b}: Δrel bytes/token {c['delta_rel']:+.1%}, win rate {c['win_rate']:.1%}"
                f" ({c['languages']} languages)\n"
            )
