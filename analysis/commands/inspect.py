"""`python -m analysis inspect TOKENIZER [--json]`: the summary card of a tokenizer."""

from __future__ import annotations

import argparse

from ._common import add_tokenizer_argument, load_from_args, print_json

NAME = "inspect"
HELP = "summarise a tokenizer: model type, sizes, flags, pipeline, special tokens"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `inspect`."""
    add_tokenizer_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Load and summarise the tokenizer (:meth:`analysis.tokenizer.tokenizer.tokenizer.LoadedTokenizer.inspect`)."""
    s = load_from_args(args).inspect().to_json()
    if args.json:
        print_json(s)
    else:
        for k, v in s.items():
            if isinstance(v, list):
                v = ", ".join(map(str, v)) or "—"
            print(f"{k:>26}: {v}")
    return 0
