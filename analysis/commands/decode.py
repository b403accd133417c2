"""`python -m analysis decode TOKENIZER IDS… [--skip-special] [--json]`: ids → text."""

from __future__ import annotations

import argparse

from analysis.views.decode import decode_ids, parse_ids

from ._common import add_tokenizer_argument, load_from_args, print_json

NAME = "decode"
HELP = "decode token ids to text (ids as `1 2 3` or `[1, 2, 3]`), token by token and as a whole"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `decode`."""
    add_tokenizer_argument(p, required=True)
    p.add_argument(
        "ids", nargs="+", help="token ids (separated by spaces or commas; brackets, if any, must pair up)"
    )
    p.add_argument("--skip-special", action="store_true", help="leave special tokens out of the text")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Decode the ids (:func:`analysis.views.decode.decode_ids`)."""
    out = decode_ids(load_from_args(args), parse_ids(" ".join(args.ids)), skip_special=args.skip_special)
    if args.json:
        print_json(out.to_json())
        return 0
    print(out.text)
    if out.unknown:
        print(f"ids outside the vocabulary (left out): {', '.join(map(str, out.unknown))}")
    return 0
