"""`python -m analysis vocab-diff A B [C …] [--by raw] [--unique-csv DIR] [--json]`: vocabulary overlap."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.core.inputs import whole_number
from analysis.core.progress import stderr_progress
from analysis.tokenizer.sources import load
from analysis.views.vocab_diff import BY_CHOICES, MAX_VOCAB, MAX_VOCAB_LIMIT, check_sizes, vocab_diff

from ._common import print_json

NAME = "vocab-diff"
HELP = "compare the vocabularies of 2–8 tokenizers: shared tokens, tokens unique to each, Jaccard indices"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `vocab-diff`."""
    p.add_argument(
        "tokenizers", nargs="+", help="2–8 tokenizers (folder, tokenizer.json, .gguf file or hub id)"
    )
    p.add_argument("--by", choices=BY_CHOICES, default="bytes",
                   help="compare what tokens stand for (bytes, default) or their raw vocabulary strings")  # fmt: skip
    p.add_argument("--unique-csv", type=Path, default=None, metavar="DIR",
                   help="write the tokens unique to each tokenizer to DIR/unique-<name>.csv")  # fmt: skip
    p.add_argument("--max-vocab", type=whole_number(1, MAX_VOCAB_LIMIT), default=MAX_VOCAB, metavar="N",
                   help=f"refuse vocabularies over N tokens (default {MAX_VOCAB:,}, the page's limit; at most "
                   f"{MAX_VOCAB_LIMIT:,}: a 2,000,000-token vocabulary takes about a gigabyte)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object (unique tokens included)")


def run(args: argparse.Namespace) -> int:
    """Load the tokenizers and print their overlap (:func:`analysis.views.vocab_diff.vocab_diff`)."""
    toks = []
    for t in args.tokenizers:  # each checked as it loads: the next one is not read when one is over the limit
        toks.append(load(t))
        check_sizes(toks[-1:], [t], args.max_vocab)
    names = [t.name for t in toks]
    names = [n if names.count(n) == 1 else f"{n} ({k})" for k, n in enumerate(names, 1)]
    diff = vocab_diff(
        toks, names, by=args.by, max_vocab=args.max_vocab, progress=stderr_progress("vocab-diff")
    )
    if args.unique_csv is not None:
        args.unique_csv.mkdir(parents=True, exist_ok=True)
        for n in names:
            (args.unique_csv / f"unique-{n.replace('/', '_')}.csv").write_text(
                diff.unique_csv(n), encoding="utf-8"
            )
    if args.json:
        print_json(diff.to_json())
        return 0
    print(
        f"compared by {diff.by}; {diff.union:,} distinct tokens in all, {diff.shared_by_all:,} shared by all"
    )
    for n in names:
        print(f"{n:>30}: {diff.sizes[n]:>8,} tokens, {len(diff.unique[n]):>8,} unique to it")
    for p in diff.pairs:
        print(f"{p.a} ∩ {p.b}: {p.shared:,} shared, Jaccard {p.jaccard:.3f}")
    return 0
