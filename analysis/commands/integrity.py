"""`python -m analysis integrity TOKENIZER [--json]`: does every id decode to bytes that encode back to that id
alone? The others, each with its reason (:func:`analysis.bpe.integrity.integrity`)."""

from __future__ import annotations

import argparse

from analysis.bpe.integrity import REASONS, integrity
from analysis.core.inputs import whole_number
from analysis.core.progress import stderr_progress

from ._common import add_tokenizer_argument, load_from_args, print_json

NAME = "integrity"
HELP = (
    "check that every id decodes to bytes that encode back to that id alone; list the others with the reason"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `integrity`."""
    add_tokenizer_argument(p)
    p.add_argument(
        "--show",
        type=whole_number(0, 100_000),
        default=5,
        metavar="N",
        help="text output: N ids per reason (default 5)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument(
        "--json", action="store_true", help="print one JSON object (counts; up to 200 ids per reason)"
    )


def run(args: argparse.Namespace) -> int:
    """Check every id and print the counts per reason (with examples) or the JSON document."""
    tok = load_from_args(args)
    rep = integrity(tok, progress=None if args.quiet or args.json else stderr_progress("integrity"))
    if args.json:
        print_json(rep.to_json())
        return 0
    print(f"{rep.tokenizer}: {rep.round_trip:,} of {rep.ids:,} ids come back alone; {len(rep.rows):,} do not "
          f"({rep.seconds:.1f} s)")  # fmt: skip
    counts = rep.counts
    for reason in REASONS:
        if counts[reason]:
            shown = [r for r in rep.rows if r.reason == reason][: max(args.show, 0)]
            examples = ", ".join(f"{r.id} {r.readable!r}" for r in shown)
            print(f"  {reason:>24}: {counts[reason]:>7,}  e.g. {examples}")
    for note in rep.notes:
        print(f"note: {note}")
    return 0
