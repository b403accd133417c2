"""`python -m analysis stt TOKENIZER [--json] [--csv FILE]`: the Self-Tokenization Test.

Runs every vocabulary string through the bare BPE model (ignore_merges off, no dropout) and puts every
id in one category: reachable, unreachable_multi, unreachable_other_single, merge_skip_only,
byte_fallback, special, unk. `unreachable` is the STT count (the three unreachable categories).

`--corpus PATH …` (files, folders, globs, ``hf://`` paths) also reports the vocabulary tokens the corpus never
produces, counted as the `produced-ids` statistic of :mod:`analysis.jobs` (in this process or with
``--executor local|slurm|ray``: the same counts). ``--json`` prints :meth:`analysis.bpe.STTRun.to_json`, the
schema the Token health page downloads.
"""

from __future__ import annotations

import argparse
import sys

from analysis.bpe import (
    CATEGORIES,
    NeverProduced,
    STTRun,
    explain_unreachable,
    iter_tree,
    merge_tree,
    stt_report,
)
from analysis.core.inputs import whole_number
from analysis.core.outputs import atomic_write_text
from analysis.errors import DataError

from ._common import (
    add_corpus_arguments,
    add_tokenizer_argument,
    compute_from_args,
    load_from_args,
    print_json,
)

NAME = "stt"
HELP = "Self-Tokenization Test: which BPE vocabulary tokens the merges can never produce"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `stt`."""
    add_tokenizer_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object (counts + unreachable tokens)")
    p.add_argument(
        "--csv", metavar="FILE", help="write the per-token table (id, token, readable, category, ...)"
    )
    p.add_argument(
        "--explain",
        type=whole_number(0),
        default=0,
        metavar="N",
        help="explain why, for the first N unreachable tokens",
    )
    p.add_argument(
        "--tree",
        metavar="TOKEN",
        help="print the merge tree of one token (raw or readable form); alone, only the tree; with --csv, "
        "--explain or --corpus, the tree and then the report",
    )
    add_corpus_arguments(
        p,
        "--corpus",
        "--text",
        help="also report the vocabulary tokens this corpus never produces: a file (one sentence per line), "
        "folder, quoted glob or hf://datasets/… path; repeatable",
    )


def never_produced_on(tok, args: argparse.Namespace) -> NeverProduced:
    """The tokens the `--corpus` inputs never produce (`produced-ids` on the chosen executor)."""
    run = compute_from_args(tok, "produced-ids", args, label="stt: produced ids")
    units = int(run.totals.get("units", 0))
    if not units:
        raise DataError("the --corpus text is empty: every token would count as never produced")
    return NeverProduced.from_counts(tok, run.result, units, run.summary())


def run(args: argparse.Namespace) -> int:
    """Run STT and print counts (text or JSON); optionally write the CSV table."""
    tok = load_from_args(args)
    if args.tree is not None:
        report_too = bool(args.csv or args.explain or args.inputs)  # never drop what else was asked for
        if report_too and args.json:
            raise DataError(
                "--tree with --json prints the tree's JSON alone: run --csv/--explain/--corpus separately"
            )
        _print_tree(tok, args.tree, as_json=args.json)
        if not report_too:
            return 0
        sys.stdout.write("\n")
    rep = stt_report(tok)
    result = STTRun(rep)
    if args.explain:
        result.explanations = [
            {k: v for k, v in explain_unreachable(tok, r.id).items() if k != "actual_tree"}
            for r in rep.unreachable[: args.explain]
        ]
    if args.inputs:
        result.never = never_produced_on(tok, args)
    if args.csv:
        atomic_write_text(args.csv, rep.to_csv(tok.id_to_token))
    out = result.to_json()
    if args.json:
        print_json(out)
        return 0
    w = sys.stdout.write
    w(f"{tok.name}: STT over {out['vocab_size']} ids (ignore_merges={out['ignore_merges']})\n")
    for k in ("reachable", "unreachable", *CATEGORIES[1:]):
        w(f"{k:>26}: {out[k]}\n")
    if "never_produced" in out:
        w(f"{'never_produced':>26}: {out['never_produced']} (on {out['corpus_lines']} lines)\n")
    shown = out["unreachable_tokens"][:20]
    if shown:
        w("first unreachable tokens: " + ", ".join(f"{t['id']}:{t['readable']!r}" for t in shown) + "\n")
    for e in out.get("explanations", []):
        w(f"  {e['id']} {e['readable']!r}: {e['reason']}\n")
    if args.csv:
        w(f"wrote {args.csv}\n")
    return 0


def _print_tree(tok, token: str, as_json: bool) -> int:
    """Print how BPE builds one token (indented, or JSON)."""
    raw = token
    if raw not in tok.vocab:
        found = [s for s in tok.vocab if tok.readable(s) == token]
        if not found:
            raise DataError(f"{token!r} is not a vocabulary token of {tok.name}")
        raw = found[0]
    tree = merge_tree(tok, raw)
    if as_json:
        print_json(tree)
        return 0
    for node, depth in iter_tree(tree):
        rank = "" if node.get("rank") is None else f"  #{node['rank']}"
        flag = "  (UNREACHABLE: BPE builds the pieces below)" if node.get("reachable") is False else ""
        sys.stdout.write(f"{'  ' * depth}{tok.readable(node['token'])!r} [{node.get('id')}]{rank}{flag}\n")
    return 0
